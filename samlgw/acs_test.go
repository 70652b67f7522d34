package samlgw_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/samlgw/testidp"
)

func allowIDPInitiated(s *config.SAML) { s.AllowIDPInitiated = true }

func TestACSAcceptsSignedResponse(t *testing.T) {
	for _, onResponse := range []bool{false, true} {
		name := "assertion signed"
		if onResponse {
			name = "response signed"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, withSAML(allowIDPInitiated))
			r := valid()
			r.SignResponse = onResponse
			a := f.post(t, signed(t, r), true)
			if a.status != http.StatusOK || a.token == "" {
				t.Fatalf("status %d code %q message %q, want 200 with a token", a.status, a.code, a.message)
			}
			c := claimsOf(t, a.token)
			for k, want := range map[string]any{
				"sub": "alice@example.com", "email": "alice@example.com", "tenant_id": "AcMe",
				"iss": entityID, "aud": entityID, "department": "finance",
			} {
				if c[k] != want {
					t.Errorf("claim %s = %v, want %v", k, c[k], want)
				}
			}
			if roles, _ := c["roles"].([]any); len(roles) != 2 || roles[0] != "admin" || roles[1] != "billing" {
				t.Errorf("roles = %v, want [admin billing]", c["roles"])
			}
		})
	}
}

func TestACSBrowserGetsCookieAndRedirect(t *testing.T) {
	f := newFixture(t, withSAML(allowIDPInitiated))
	a := f.post(t, signed(t, valid()), false)
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/dashboard?tab=1" {
		t.Fatalf("status %d Location %q, want 303 to the RelayState", a.status, a.header.Get("Location"))
	}
	c := a.header.Get("Set-Cookie")
	if !strings.HasPrefix(c, "__Host-svc_session=ey") || strings.Contains(c, "Domain") {
		t.Errorf("Set-Cookie %q: want __Host-svc_session (acs_url is https), no Domain", c)
	}
	for _, want := range []string{"HttpOnly", "SameSite=Lax", "Secure", "Path=/"} {
		if !strings.Contains(c, want) {
			t.Errorf("Set-Cookie %q lacks %q", c, want)
		}
	}
}

// TestACSRefusals is the negative corpus: documents signed by xmlsec1 with
// the IdP's real key, each refused with its code.
func TestACSRefusals(t *testing.T) {
	past := time.Now().Add(-2 * time.Hour)
	future := time.Now().Add(2 * time.Hour)
	// signedAfter signs the valid response once edit changed it.
	signedAfter := func(edit func(*testidp.Response)) func(*testing.T) []byte {
		return func(t *testing.T) []byte {
			r := valid()
			edit(&r)
			return signed(t, r)
		}
	}
	tests := []struct {
		name   string
		doc    func(t *testing.T) []byte
		status int
		code   samlgw.Code
	}{
		{"unsigned", func(t *testing.T) []byte { return testIdP.XML(valid(), false) },
			401, reason.SAMLSignatureInvalid},
		{"signed by another key", func(t *testing.T) []byte {
			other, err := testidp.Generate(idpID, ssoURL)
			if err != nil {
				t.Fatal(err)
			}
			return xmlsecSign(t, other, other.XML(valid(), true), false)
		}, 401, reason.SAMLSignatureInvalid},
		{"tampered after signing", func(t *testing.T) []byte {
			return bytes.Replace(signed(t, valid()), []byte("alice@example.com</saml:NameID>"), []byte("mallory@example.com</saml:NameID>"), 1)
		}, 401, reason.SAMLSignatureInvalid},
		{"sha1", signedAfter(func(r *testidp.Response) {
			r.SignatureMethod, r.DigestMethod = "http://www.w3.org/2000/09/xmldsig#rsa-sha1", "http://www.w3.org/2000/09/xmldsig#sha1"
		}), 401, reason.SAMLAlgorithmNotAllowed},
		{"two assertions", func(t *testing.T) []byte {
			d := readDoc(t, signed(t, valid()))
			second := readDoc(t, signed(t, valid())).Root().SelectElement("Assertion")
			d.Root().AddChild(second.Copy())
			return writeDoc(t, d)
		}, 400, reason.SAMLMultipleAssertions},
		{"DTD", func(t *testing.T) []byte {
			doc := signed(t, valid())
			doc = bytes.Replace(doc, []byte("<?xml version=\"1.0\"?>\n"), nil, 1)
			return append([]byte(`<?xml version="1.0"?><!DOCTYPE r [<!ENTITY e "x">]>`), doc...)
		}, 400, reason.SAMLDTDForbidden},
		{"expired", signedAfter(func(r *testidp.Response) {
			r.NotBefore, r.NotOnOrAfter, r.IssueInstant = past.Add(-time.Hour), past, past.Add(-time.Hour)
		}), 401, reason.SAMLExpired},
		{"not yet valid", signedAfter(func(r *testidp.Response) {
			r.NotBefore, r.NotOnOrAfter = future, future.Add(time.Hour)
		}), 401, reason.SAMLNotYetValid},
		{"audience", signedAfter(func(r *testidp.Response) {
			r.Audience = "https://other.example.com/sp"
		}), 401, reason.SAMLAudienceMismatch},
		{"recipient", signedAfter(func(r *testidp.Response) {
			r.Recipient = "https://evil.example.com/acs"
		}), 401, reason.SAMLRecipientMismatch},
		{"destination", signedAfter(func(r *testidp.Response) {
			r.Destination = "https://evil.example.com/acs"
		}), 401, reason.SAMLRecipientMismatch},
		{"status", signedAfter(func(r *testidp.Response) {
			r.Status = "urn:oasis:names:tc:SAML:2.0:status:Responder"
		}), 401, reason.SAMLStatusFailure},
		{"issuer", signedAfter(func(r *testidp.Response) {
			r.Issuer = "https://evil.example.com/idp"
		}), 401, reason.SAMLUntrustedIssuer},
		{"missing tenant", signedAfter(func(r *testidp.Response) {
			r.Attributes = r.Attributes[:2]
		}), 403, reason.SAMLTenantMissing},
		{"two tenants", signedAfter(func(r *testidp.Response) {
			r.Attributes[2].Values = []string{"AcMe", "globex"}
		}), 403, reason.SAMLTenantMissing},
		{"request unknown", signedAfter(func(r *testidp.Response) {
			r.InResponseTo = "_never-sent"
		}), 401, reason.SAMLRequestUnknown},
		{"not base64", nil, 400, reason.SAMLMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, withSAML(allowIDPInitiated))
			var a answer
			if tt.doc == nil {
				a = f.postBody(t, "SAMLResponse=%%%not-base64", true)
			} else {
				a = f.post(t, tt.doc(t), true)
			}
			if a.status != tt.status || a.code != string(tt.code) {
				t.Fatalf("status %d code %q (%s), want %d %q", a.status, a.code, a.message, tt.status, tt.code)
			}
			if a.message == "" {
				t.Error("refusal without a message")
			}
		})
	}
}

// xsw applies one of the XML signature wrapping attacks to a signed
// document: the attacker's assertion names mallory, the signed original
// is kept somewhere the signature still finds it.
func xsw(t *testing.T, n int) []byte {
	onResponse := n <= 2
	r := valid()
	r.SignResponse = onResponse
	d := readDoc(t, signed(t, r))
	root := d.Root()
	orig := root.SelectElement("Assertion")
	evil := orig.Copy()
	if nid := evil.FindElement(".//NameID"); nid != nil {
		nid.SetText("mallory@example.com")
	}
	evil.CreateAttr("ID", testidp.NewID())
	if s := evil.SelectElement("Signature"); s != nil {
		evil.RemoveChild(s)
	}
	switch n {
	case 1, 2: // evil Response at the root, the signed original inside its Signature (1) or beside it (2)
		origResp := root.Copy()
		sig := root.SelectElement("Signature")
		root.CreateAttr("ID", testidp.NewID())
		root.RemoveChild(root.SelectElement("Assertion"))
		root.AddChild(evil)
		if n == 1 {
			sig.AddChild(origResp)
		} else {
			root.InsertChildAt(sig.Index(), origResp)
		}
	case 3: // evil assertion before the signed one
		root.InsertChildAt(orig.Index(), evil)
	case 4: // evil assertion wraps the signed one
		root.RemoveChild(orig)
		evil.AddChild(orig)
		root.AddChild(evil)
	case 5: // the signature moves to the evil copy, the original is appended
		sig := orig.SelectElement("Signature")
		orig.RemoveChild(sig)
		evil.InsertChildAt(1, sig)
		root.RemoveChild(orig)
		root.AddChild(evil)
		root.AddChild(orig)
	case 6: // the original lives inside the signature of the evil copy
		sig := orig.SelectElement("Signature")
		orig.RemoveChild(sig)
		evil.InsertChildAt(1, sig)
		sig.AddChild(orig)
		root.RemoveChild(orig)
		root.AddChild(evil)
	case 7: // the original hides in Extensions
		root.RemoveChild(orig)
		ext := root.CreateElement("samlp:Extensions")
		ext.AddChild(orig)
		root.AddChild(evil)
	case 8: // the original in a ds:Object of the evil copy's signature
		sig := orig.SelectElement("Signature").Copy()
		obj := sig.CreateElement("ds:Object")
		if s := orig.SelectElement("Signature"); s != nil {
			orig.RemoveChild(s)
		}
		root.RemoveChild(orig)
		obj.AddChild(orig)
		evil.InsertChildAt(1, sig)
		root.AddChild(evil)
	}
	return writeDoc(t, d)
}

func TestACSRefusesSignatureWrapping(t *testing.T) {
	for n := 1; n <= 8; n++ {
		t.Run("XSW"+string(rune('0'+n)), func(t *testing.T) {
			f := newFixture(t, withSAML(allowIDPInitiated))
			a := f.post(t, xsw(t, n), true)
			if a.status < 400 || a.status >= 500 || a.token != "" {
				t.Fatalf("status %d code %q token %v: the wrapped document was not refused", a.status, a.code, a.token != "")
			}
			want := map[bool]samlgw.Code{true: reason.SAMLMalformed, false: reason.SAMLMultipleAssertions}[n <= 2]
			if a.code != string(want) {
				t.Errorf("code %q (%s), want %q", a.code, a.message, want)
			}
		})
	}
}

func TestACSReplay(t *testing.T) {
	f := newFixture(t, withSAML(allowIDPInitiated))
	doc := signed(t, valid())
	if a := f.post(t, doc, true); a.status != http.StatusOK {
		t.Fatalf("first post: %d %q %s", a.status, a.code, a.message)
	}
	if a := f.post(t, doc, true); a.status != http.StatusUnauthorized || a.code != string(reason.SAMLReplayed) {
		t.Fatalf("replay: %d %q, want 401 %q", a.status, a.code, reason.SAMLReplayed)
	}
}

// A comment inside NameID does not cut the name short: the IdP signed
// "alice@example.com.evil.com", and that is who signs in.
func TestACSCommentInNameID(t *testing.T) {
	f := newFixture(t, withSAML(allowIDPInitiated))
	r := valid()
	r.NameID = "alice@example.com.evil.com"
	r.Attributes = r.Attributes[1:] // the email falls back to the NameID
	doc := bytes.Replace(signed(t, r), []byte("alice@example.com.evil.com"), []byte("alice@example.com<!---->.evil.com"), 1)
	if !bytes.Contains(doc, []byte("<!---->")) {
		t.Fatal("comment not inserted")
	}
	a := f.post(t, doc, true)
	if a.status != http.StatusOK {
		t.Fatalf("status %d %q %s", a.status, a.code, a.message)
	}
	c := claimsOf(t, a.token)
	if c["sub"] != "alice@example.com.evil.com" || c["email"] != "alice@example.com.evil.com" {
		t.Errorf("sub %v email %v, want the whole text alice@example.com.evil.com", c["sub"], c["email"])
	}
}

func TestACSBodyLimit(t *testing.T) {
	f := newFixture(t, withSAML(allowIDPInitiated))
	body := "SAMLResponse=" + strings.Repeat("A", 12<<20)
	a := f.postBody(t, body, true)
	if a.status != http.StatusRequestEntityTooLarge || a.code != string(reason.SAMLTooLarge) {
		t.Fatalf("status %d code %q, want 413 %q", a.status, a.code, reason.SAMLTooLarge)
	}
}

func TestACSUnsolicitedRefusedByDefault(t *testing.T) {
	f := newFixture(t)
	a := f.post(t, signed(t, valid()), true)
	if a.status != http.StatusUnauthorized || a.code != string(reason.SAMLUnsolicited) {
		t.Fatalf("status %d code %q, want 401 %q", a.status, a.code, reason.SAMLUnsolicited)
	}
}

func TestSPInitiatedLogin(t *testing.T) {
	f := newFixture(t)
	id, loc, status := f.login(t, "/reports?q=1")
	if status != http.StatusFound {
		t.Fatalf("login status %d, want 302", status)
	}
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != ssoURL {
		t.Errorf("redirect to %s, want the IdP SSO URL %s", got, ssoURL)
	}
	if loc.Query().Get("RelayState") != "/reports?q=1" {
		t.Errorf("RelayState %q", loc.Query().Get("RelayState"))
	}
	r := valid()
	r.InResponseTo = id
	if a := f.post(t, signed(t, r), true); a.status != http.StatusOK {
		t.Fatalf("answer to our request: %d %q %s", a.status, a.code, a.message)
	}
	// The request is answered once: a second assertion for it is refused.
	f.answeredOnce(t, r)
}

// An unsigned Response cannot make a signed IdP-initiated assertion look
// solicited: InResponseTo is read only from signed content.
func TestUnsignedInResponseToDoesNotSolicit(t *testing.T) {
	f := newFixture(t)
	id, _, status := f.login(t, "/")
	if status != http.StatusFound {
		t.Fatalf("login status %d, want 302", status)
	}
	d := readDoc(t, signed(t, valid())) // the assertion alone is signed
	d.Root().CreateAttr("InResponseTo", id)
	a := f.post(t, writeDoc(t, d), true)
	if a.status != http.StatusUnauthorized || a.code != string(reason.SAMLUnsolicited) {
		t.Fatalf("status %d code %q, want 401 %q", a.status, a.code, reason.SAMLUnsolicited)
	}
}

func TestLoginRefusesOpenRedirect(t *testing.T) {
	f := newFixture(t)
	for _, rt := range []string{"https://evil.example.com/", "//evil.example.com/x", "/\\evil.example.com", "javascript:alert(1)", "relative"} {
		if _, _, status := f.login(t, rt); status != http.StatusBadRequest {
			t.Errorf("return_to %q: status %d, want 400", rt, status)
		}
	}
}

func TestDevelopmentSkipsSignatureOnly(t *testing.T) {
	var logs testkit.SyncBuffer
	f := newFixture(t, withSAML(allowIDPInitiated), devMode, func(_ *config.Config, d *samlgw.Deps) {
		d.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if !strings.Contains(logs.String(), "SAML SIGNATURES ARE NOT VERIFIED") {
		t.Errorf("no warning at start:\n%s", logs.String())
	}
	if a := f.post(t, testIdP.XML(valid(), false), true); a.status != http.StatusOK {
		t.Fatalf("unsigned in development: %d %q %s, want 200", a.status, a.code, a.message)
	}
	if !strings.Contains(logs.String(), "accepted WITHOUT signature verification") {
		t.Errorf("no warning on the accepted assertion:\n%s", logs.String())
	}
	r := valid()
	r.Audience = "https://other.example.com/"
	if a := f.post(t, testIdP.XML(r, false), true); a.code != string(reason.SAMLAudienceMismatch) {
		t.Fatalf("wrong audience in development: %d %q, want %q", a.status, a.code, reason.SAMLAudienceMismatch)
	}
	if !f.gw.Status().SignatureCheckDisabled {
		t.Error("status does not show that signatures are not checked")
	}
}

// A client accepting JSON gets exactly {token, token_type, expires_at},
// expires_at being the token's exp, and no cookie.
func TestACSJSONAnswer(t *testing.T) {
	f := newFixture(t, withSAML(allowIDPInitiated))
	form := url.Values{"SAMLResponse": {b64(signed(t, valid()))}}
	resp, raw := testkit.Do(t, nil, f.acsRequest(t, form.Encode(), "text/html;q=0.5, application/json"))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("%d %q Set-Cookie %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Set-Cookie"), raw)
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatal(err)
	}
	if len(body) != 3 || body["token_type"] != "Bearer" {
		t.Fatalf("body %s, want token, token_type Bearer, expires_at", raw)
	}
	tok, _ := body["token"].(string)
	exp, err := time.Parse(time.RFC3339, body["expires_at"].(string))
	if err != nil {
		t.Fatalf("expires_at: %v", err)
	}
	if claimExp, _ := claimsOf(t, tok)["exp"].(float64); int64(claimExp) != exp.Unix() {
		t.Errorf("expires_at %s, token exp %v", exp, claimExp)
	}
	if d := time.Until(exp); d <= 0 || d > 15*time.Minute {
		t.Errorf("expires in %s, want within the default token_ttl of 15m", d)
	}
	// ES256 with the issuer's kid; iat = nbf, exp = iat + token_ttl.
	hdr, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(hdr, &h); err != nil || h["alg"] != "ES256" || h["kid"] != f.issuer.KeyID() || h["kid"] == "" {
		t.Errorf("JWS header %s, want alg ES256 and kid %q", hdr, f.issuer.KeyID())
	}
	c := claimsOf(t, tok)
	iat, _ := c["iat"].(float64)
	if nbf, _ := c["nbf"].(float64); iat == 0 || nbf != iat || int64(iat)+int64((15*time.Minute).Seconds()) != exp.Unix() {
		t.Errorf("iat %v nbf %v exp %v, want iat = nbf and exp = iat + 15m", c["iat"], c["nbf"], c["exp"])
	}
}

// Each refusal is logged with its code, and no log line carries the
// assertion or who it names.
func TestACSRefusalLogged(t *testing.T) {
	var buf testkit.SyncBuffer
	f := newFixture(t, withSAML(allowIDPInitiated), func(_ *config.Config, d *samlgw.Deps) {
		d.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	})
	r := valid()
	r.NameID = "zed@example.com"
	r.Attributes = r.Attributes[1:]
	doc := signed(t, r)
	f.post(t, doc, true)
	f.post(t, doc, true)
	f.post(t, bytes.Replace(doc, []byte("zed@example.com"), []byte("mallory@example.com"), 1), true)
	logs := buf.String()
	for _, want := range []string{`"reason":"saml-replayed"`, `"reason":"saml-signature-invalid"`, `"msg":"SAML response refused"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	for _, leak := range []string{"zed@example.com", "mallory@example.com", "finance", "SignatureValue", b64(doc)[:40]} {
		if strings.Contains(logs, leak) {
			t.Errorf("log carries %q:\n%s", leak, logs)
		}
	}
}

// Within clock_skew_seconds of its window an assertion is accepted.
func TestACSClockSkewTolerated(t *testing.T) {
	f := newFixture(t, withSAML(allowIDPInitiated))
	now := time.Now()
	for name, window := range map[string][2]time.Time{
		"ended 10s ago": {now.Add(-5 * time.Minute), now.Add(-10 * time.Second)},
		"starts in 10s": {now.Add(10 * time.Second), now.Add(5 * time.Minute)},
	} {
		r := valid()
		r.NotBefore, r.NotOnOrAfter, r.IssueInstant = window[0], window[1], window[0]
		if a := f.post(t, signed(t, r), true); a.status != http.StatusOK {
			t.Errorf("%s: %d %q %s, want 200 within the default 30s skew", name, a.status, a.code, a.message)
		}
	}
}
