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

// The session cookie is Secure unless acs_url is plain http on a loopback
// host, at the ACS and at logout alike; where it is Secure it is named
// "__Host-svc_session", with Path=/ and no Domain as the prefix requires,
// and the ACS and logout clear the unprefixed name too.
func TestCookieSecureRule(t *testing.T) {
	tests := []struct {
		acs    string
		secure bool
	}{
		{"https://app.example.com/auth/saml/acs", true},
		{"http://app.example.com/auth/saml/acs", true},
		{"http://127.0.0.1:7701/auth/saml/acs", false},
		{"http://localhost:7701/auth/saml/acs", false},
		{"http://[::1]:7701/auth/saml/acs", false},
	}
	for _, tt := range tests {
		t.Run(tt.acs, func(t *testing.T) {
			f := newFixture(t, withSAML(func(s *config.SAML) { s.ACSURL, s.AllowIDPInitiated = tt.acs, true }))
			r := valid()
			r.Destination, r.Recipient = tt.acs, tt.acs
			a := f.post(t, signed(t, r), false)
			if a.status != http.StatusSeeOther {
				t.Fatalf("ACS: %d %q %s", a.status, a.code, a.message)
			}
			logout, err := http.NewRequest(http.MethodPost, f.srv.URL+"/auth/saml/logout", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(logout)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := []string{"svc_session"}
			if tt.secure {
				want = []string{"__Host-svc_session", "svc_session"}
			}
			for where, h := range map[string]http.Header{"acs": a.header, "logout": resp.Header} {
				cs := (&http.Response{Header: h}).Cookies()
				var got []string
				for _, c := range cs {
					got = append(got, c.Name)
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("%s: cookies %q, want %q", where, h.Values("Set-Cookie"), want)
				}
				for _, c := range cs {
					if c.Secure != tt.secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" {
						t.Errorf("%s: Set-Cookie %q: Secure=%v HttpOnly=%v SameSite=%v Path=%q Domain=%q, want Secure=%v HttpOnly Lax, Path / and no Domain",
							where, c.Raw, c.Secure, c.HttpOnly, c.SameSite, c.Path, c.Domain, tt.secure)
					}
					if clears := c.MaxAge < 0 && c.Value == ""; clears != (where == "logout" || c.Name != want[0]) {
						t.Errorf("%s: Set-Cookie %q: clears the cookie %v, want the session set at the ACS and every other cookie cleared", where, c.Raw, clears)
					}
				}
			}
		})
	}
}

// A sign-in where the session cookie is prefixed also clears a session
// cookie of the unprefixed name (one from before the prefix): the new
// session is the prefixed one alone. The IdP's cross-site POST does not
// carry that SameSite=Lax cookie, so it is cleared whether or not the
// request shows it. Where the cookie is not prefixed there is nothing to
// clear.
func TestACSClearsTheUnprefixedSessionCookie(t *testing.T) {
	for _, tc := range []struct {
		acs        string
		wantClears bool
	}{
		{"https://app.example.com/auth/saml/acs", true},
		{"http://127.0.0.1:7701/auth/saml/acs", false},
	} {
		t.Run(tc.acs, func(t *testing.T) {
			f := newFixture(t, withSAML(func(s *config.SAML) { s.ACSURL, s.AllowIDPInitiated = tc.acs, true }))
			r := valid()
			r.Destination, r.Recipient = tc.acs, tc.acs
			a := f.post(t, signed(t, r), false)
			var cleared, set bool
			for _, c := range (&http.Response{Header: a.header}).Cookies() {
				switch {
				case c.Name == "svc_session" && c.MaxAge < 0 && c.Value == "" && c.Path == "/":
					cleared = true
				case c.Name == "svc_session" || c.Name == "__Host-svc_session":
					set = c.Value != ""
				}
			}
			if a.status != http.StatusSeeOther || !set || cleared != tc.wantClears {
				t.Errorf("ACS: %d Set-Cookie %q: new session %v, unprefixed one cleared %v, want 303, a session, cleared %v",
					a.status, a.header.Values("Set-Cookie"), set, cleared, tc.wantClears)
			}
		})
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

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// attribute_mapping renames the attributes that fill email, roles and
// tenant_id; the default names then become ordinary custom claims, and an
// attribute named like a registered claim never sets it.
func TestACSAttributeMapping(t *testing.T) {
	f := newFixture(t, withSAML(func(s *config.SAML) {
		s.AllowIDPInitiated = true
		s.AttributeMapping = config.AttributeMapping{Email: "mail", Role: "memberOf", Tenant: "org"}
	}))
	r := valid()
	r.NameID = "alice"
	r.Attributes = []testidp.Attribute{
		{Name: "mail", Values: []string{"alice@example.org"}},
		{Name: "memberOf", Values: []string{"admins", "auditors"}},
		{Name: "org", Values: []string{"globex"}},
		{Name: "tenant_id", Values: []string{"acme"}},
		{Name: "sub", Values: []string{"mallory"}},
		{Name: "cost_center", Values: []string{"42"}},
	}
	a := f.post(t, signed(t, r), true)
	if a.status != http.StatusOK {
		t.Fatalf("%d %q %s", a.status, a.code, a.message)
	}
	c := claimsOf(t, a.token)
	for k, want := range map[string]any{"sub": "alice", "email": "alice@example.org", "tenant_id": "globex", "cost_center": "42"} {
		if c[k] != want {
			t.Errorf("claim %s = %v, want %v", k, c[k], want)
		}
	}
	if roles, _ := c["roles"].([]any); len(roles) != 2 || roles[0] != "admins" || roles[1] != "auditors" {
		t.Errorf("roles = %v, want [admins auditors]", c["roles"])
	}
	// The default tenant attribute is no longer the tenant, and cannot
	// become one through a custom claim either (tenant_id is registered).
	r.Attributes = r.Attributes[:2]
	r.Attributes = append(r.Attributes, testidp.Attribute{Name: "tenant_id", Values: []string{"acme"}})
	if a := f.post(t, signed(t, r), true); a.status != http.StatusForbidden || a.code != string(reason.SAMLTenantMissing) {
		t.Errorf("without the mapped tenant attribute: %d %q, want 403 %q", a.status, a.code, reason.SAMLTenantMissing)
	}
}

// Unknown paths and methods under the prefix are JSON refusals too.
func TestUnknownRouteRefusals(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		method, path string
		status       int
		code         samlgw.Code
		allow        string
	}{
		{http.MethodGet, "/auth/saml/acs", http.StatusMethodNotAllowed, reason.SAMLMethodNotAllowed, "POST"},
		{http.MethodDelete, "/auth/saml/logout", http.StatusMethodNotAllowed, reason.SAMLMethodNotAllowed, "GET, HEAD, POST"},
		{http.MethodPost, "/auth/saml/metadata", http.StatusMethodNotAllowed, reason.SAMLMethodNotAllowed, "GET, HEAD"},
		{http.MethodGet, "/auth/saml/nope", http.StatusNotFound, reason.SAMLNotFound, ""},
		{http.MethodGet, "/", http.StatusNotFound, reason.SAMLNotFound, ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, f.srv.URL+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || err != nil || body["error"] != string(tt.code) || body["message"] == "" || resp.Header.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d %v Allow %q, want %d %q Allow %q", tt.method, tt.path, resp.StatusCode, body, resp.Header.Get("Allow"), tt.status, tt.code, tt.allow)
		}
	}
}
