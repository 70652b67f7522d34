package samlgw_test

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit/samltest"

	"github.com/beevik/etree"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/samlgw/testidp"
)

const (
	entityID = "https://app.example.com/auth/saml/metadata"
	acsURL   = "https://app.example.com/auth/saml/acs"
	idpID    = "https://idp.example.com/saml"
	ssoURL   = "https://idp.example.com/saml/sso"
)

// testIdP is shared by the tests: generating RSA keys is slow.
var testIdP = func() *testidp.IdP {
	i, err := testidp.Generate(idpID, ssoURL)
	if err != nil {
		panic(err)
	}
	return i
}()

type fixture struct {
	gw     *samlgw.Gateway
	srv    *httptest.Server
	issuer *issuer.Issuer
	// jar keeps cookies as a browser does: the request cookie of login
	// goes back to the ACS with the response.
	jar http.CookieJar
}

// client is a browser of f: f's cookie jar, no redirects followed.
func (f *fixture) client() *http.Client {
	return &http.Client{Jar: f.jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type option func(*config.Config, *samlgw.Deps)

func withSAML(f func(*config.SAML)) option {
	return func(c *config.Config, _ *samlgw.Deps) { f(c.SDK.SAML) }
}

func devMode(_ *config.Config, d *samlgw.Deps) {
	d.Getenv = func(k string) string {
		if k == "SVC_ENV" {
			return "development"
		}
		return ""
	}
}

func newFixture(t testing.TB, opts ...option) *fixture {
	t.Helper()
	md := samltest.MetadataFile(t, testIdP)
	cfg := config.Config{SDK: config.SDK{SAML: &config.SAML{
		EntityID: entityID, ACSURL: acsURL, IDPMetadataFile: md,
	}}}
	cfg.SetDefaults()
	// The fixture's server, like httptest's, is on loopback.
	deps := samlgw.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Getenv: func(string) string { return "" }, ListenAddr: "127.0.0.1:0"}
	for _, o := range opts {
		o(&cfg, &deps)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	is, err := issuer.New(issuer.Options{Issuer: entityID, TTL: cfg.SDK.SAML.TokenTTL.Duration})
	if err != nil {
		t.Fatal(err)
	}
	deps.Issuer = is
	gw, err := samlgw.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	// Validating costs several times the CPU under the race detector;
	// each client's budget grows with it.
	if testkit.RaceEnabled {
		samlgw.ScaleClientBudget(gw, 10)
	}
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{gw: gw, srv: srv, issuer: is, jar: jar}
}

// valid is a response that the gateway accepts when IdP-initiated
// sign-on is allowed.
func valid() testidp.Response {
	return testidp.Response{
		Destination: acsURL, Recipient: acsURL, Audience: entityID,
		NameID: "alice@example.com",
		Attributes: []testidp.Attribute{
			{Name: config.DefaultSAMLEmailAttribute, Values: []string{"alice@example.com"}},
			{Name: "role", Values: []string{"admin", "billing"}},
			{Name: "tenant_id", Values: []string{"AcMe"}},
			{Name: "department", Values: []string{"finance"}},
		},
	}
}

// xmlsecSign signs the template in doc with xmlsec1, the independent
// signer: the signature on the Response (onResponse) or the Assertion.
func xmlsecSign(t testing.TB, idp *testidp.IdP, doc []byte, onResponse bool) []byte {
	t.Helper()
	idAttr := "urn:oasis:names:tc:SAML:2.0:assertion:Assertion"
	if onResponse {
		idAttr = "urn:oasis:names:tc:SAML:2.0:protocol:Response"
	}
	return xmlsecSignID(t, idp, doc, idAttr)
}

// xmlsecSignID signs the signature template in doc with idp's key pair;
// idAttr names the element (namespace:name) whose ID the reference uses.
func xmlsecSignID(t testing.TB, idp *testidp.IdP, doc []byte, idAttr string) []byte {
	t.Helper()
	bin := testkit.LookPath(t, "xmlsec1", "xmlsec1")
	dir := t.TempDir()
	key, cert, in, out := filepath.Join(dir, "k.pem"), filepath.Join(dir, "c.pem"), filepath.Join(dir, "in.xml"), filepath.Join(dir, "out.xml")
	for p, b := range map[string][]byte{key: idp.KeyPEM, cert: idp.CertPEM, in: doc} {
		testkit.WriteFile(t, p, b)
	}
	cmd := exec.Command(bin, "--sign", "--privkey-pem", key+","+cert, "--id-attr:ID", idAttr, "--output", out, in)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("xmlsec1 --sign: %v\n%s", err, b)
	}
	signed, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// signed renders r with a template and signs it with xmlsec1.
func signed(t testing.TB, r testidp.Response) []byte {
	t.Helper()
	return xmlsecSign(t, testIdP, testIdP.XML(r, true), r.SignResponse)
}

type answer struct {
	status  int
	code    string
	message string
	token   string
	header  http.Header
}

// post sends doc to the ACS as a browser form or as a JSON client.
func (f *fixture) post(t testing.TB, doc []byte, jsonClient bool) answer {
	t.Helper()
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}, "RelayState": {"/dashboard?tab=1"}}
	return f.postBody(t, form.Encode(), jsonClient)
}

// acsRequest is a POST of the form body to f's ACS, with accept as its
// Accept header ("" for none).
func (f *fixture) acsRequest(t testing.TB, body, accept string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/auth/saml/acs", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return req
}

func (f *fixture) postBody(t testing.TB, body string, jsonClient bool) answer {
	t.Helper()
	accept := ""
	if jsonClient {
		accept = "application/json"
	}
	resp, raw := testkit.Do(t, f.client(), f.acsRequest(t, body, accept))
	a := answer{status: resp.StatusCode, header: resp.Header}
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		a.code, _ = m["error"].(string)
		a.message, _ = m["message"].(string)
		a.token, _ = m["token"].(string)
	}
	return a
}

// claimsOf decodes a JWT's payload without verifying it (the engine tests
// verify).
func claimsOf(t testing.TB, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a compact JWS", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// readDoc parses xml for a test's surgery.
func readDoc(t testing.TB, b []byte) *etree.Document {
	t.Helper()
	d := etree.NewDocument()
	if err := d.ReadFromBytes(b); err != nil {
		t.Fatal(err)
	}
	return d
}

func writeDoc(t testing.TB, d *etree.Document) []byte {
	t.Helper()
	b, err := d.WriteToBytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// login starts a login and returns the AuthnRequest id and the
// redirect location.
func (f *fixture) login(t testing.TB, returnTo string) (id string, loc *url.URL, status int) {
	t.Helper()
	resp, err := f.client().Get(f.srv.URL + "/auth/saml/login?return_to=" + url.QueryEscape(returnTo))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return "", nil, resp.StatusCode
	}
	loc, err = url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(loc.Query().Get("SAMLRequest"))
	if err != nil {
		t.Fatal(err)
	}
	xmlReq, err := io.ReadAll(flate.NewReader(bytes.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	d := readDoc(t, xmlReq)
	return d.Root().SelectAttrValue("ID", ""), loc, resp.StatusCode
}

// answering starts a login at f and returns a valid response that answers
// it.
func (f *fixture) answering(t testing.TB) testidp.Response {
	t.Helper()
	id, _, status := f.login(t, "/")
	if status != http.StatusFound {
		t.Fatalf("login: %d, want 302", status)
	}
	r := valid()
	r.InResponseTo = id
	return r
}

// answeredOnce posts a second signed answer to the request r answers and
// expects it refused.
func (f *fixture) answeredOnce(t testing.TB, r testidp.Response) {
	t.Helper()
	if a := f.post(t, signed(t, r), true); a.status != http.StatusUnauthorized || a.code != string(reason.SAMLRequestUnknown) {
		t.Fatalf("second answer to one request: %d %q, want 401 %q", a.status, a.code, reason.SAMLRequestUnknown)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
