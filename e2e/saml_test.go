package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
)

// samlSetup is one samlify IdP and the SP identity its sidecars share.
type samlSetup struct {
	idp      *harness.SAMLIdP
	samlAddr string // the first sidecar's SAML listener, named in acs_url
}

func (s samlSetup) env(samlAddr string, allowIdPInitiated bool, extra map[string]string) map[string]string {
	env := map[string]string{
		"SVC_SAML_ADDR":                samlAddr,
		"SVC_SAML_ENTITY_ID":           "http://" + s.samlAddr + "/auth/saml/metadata",
		"SVC_SAML_ACS_URL":             "http://" + s.samlAddr + "/auth/saml/acs",
		"SVC_SAML_IDP_METADATA_URL":    s.idp.MetadataURL,
		"SVC_SAML_ALLOW_IDP_INITIATED": map[bool]string{true: "true", false: "false"}[allowIdPInitiated],
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

func startSAMLIdP(t *testing.T) samlSetup {
	t.Helper()
	key := keyOnlyIdP(t)
	samlAddr := harness.FreeAddr(t)
	idp := harness.StartSAMLIdP(t, key.KeyPEM, key.CertPEM, "http://"+samlAddr+"/auth/saml/metadata")
	return samlSetup{idp: idp, samlAddr: samlAddr}
}

// noRedirect is the tests' browser: it does not follow redirects, and it
// keeps cookies, so that the request cookie a login sets goes back to the
// ACS with the IdP's answer (the gateway refuses an answer to a sign-on
// the posting browser did not start).
var noRedirect = newBrowser()

// samlLogin GETs the gateway's login url with client, again while it
// answers 503 (until the sidecar has fetched the IdP metadata), and
// returns the first other answer, its body closed.
func samlLogin(t *testing.T, client *http.Client, url string) *http.Response {
	t.Helper()
	var resp *http.Response
	testkit.Eventually(t, "the SAML login past 503", func() bool {
		r, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		resp = r
		return r.StatusCode != http.StatusServiceUnavailable
	})
	return resp
}

// newBrowser returns an HTTP client with a cookie jar of its own that
// does not follow redirects.
func newBrowser() *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		panic(err) // cookiejar.New fails only on a bad public-suffix list
	}
	return &http.Client{
		Timeout: 10 * time.Second, Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// jarSession is the session token the browser b holds for the http
// site at host; t fails when it holds none.
func jarSession(t *testing.T, b *http.Client, host string) string {
	t.Helper()
	for _, c := range b.Jar.Cookies(&url.URL{Scheme: "http", Host: host, Path: "/"}) {
		if c.Name == "svc_session" && c.Value != "" {
			return c.Value
		}
	}
	t.Fatal("no session cookie after the sign-in")
	return ""
}

// idpAnswer is what the samlify IdP answers a JSON client.
type idpAnswer struct {
	ACSURL       string `json:"acs_url"`
	SAMLResponse string `json:"SAMLResponse"`
	RelayState   string `json:"RelayState"`
}

func askIdP(t *testing.T, u string) idpAnswer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, u, nil)
	req.Header.Set("Accept", "application/json")
	status, h, body := harness.Do(t, req)
	var a idpAnswer
	if status != http.StatusOK || json.Unmarshal(body, &a) != nil || a.SAMLResponse == "" {
		t.Fatalf("IdP %s: %s", u, harness.Describe(status, h, body))
	}
	return a
}

// postACS posts a SAMLResponse to the ACS at samlAddr as a browser does.
func postACS(t *testing.T, samlAddr string, a idpAnswer) *http.Response {
	t.Helper()
	return postACSFrom(t, noRedirect, samlAddr, a)
}

// postACSFrom is postACS from the given browser.
func postACSFrom(t *testing.T, browser *http.Client, samlAddr string, a idpAnswer) *http.Response {
	t.Helper()
	form := url.Values{"SAMLResponse": {a.SAMLResponse}, "RelayState": {a.RelayState}}
	resp, err := browser.PostForm("http://"+samlAddr+"/auth/saml/acs", form)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func refusalCode(t *testing.T, resp *http.Response) string {
	t.Helper()
	var body struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body.Error
}

func sessionCookie(resp *http.Response) string {
	for _, c := range resp.Cookies() {
		if c.Name == "svc_session" {
			return c.Value
		}
	}
	return ""
}

// samlCheck sends an ext_authz Check for GET path with the session cookie
// and no Authorization header.
func samlCheck(t *testing.T, s *harness.Sidecar, path, cookie string) *authv3.CheckResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h := map[string]string{":method": "GET", ":path": path, ":authority": "shop.example"}
	if cookie != "" {
		h["cookie"] = "theme=dark; svc_session=" + cookie
	}
	resp, err := authv3.NewAuthorizationClient(s.Conn(t)).Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "GET", Path: path, Host: "shop.example", Scheme: "https", Protocol: "HTTP/1.1", Headers: h,
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// SP-initiated sign-on against samlify: login redirects to the IdP, the
// IdP's signed response is accepted at the ACS, and the session cookie
// gets an Envoy Check allowed with the SAML user's claims.
func TestSAMLSPInitiatedWithSamlify(t *testing.T) {
	s := startSAMLIdP(t)
	sc := harness.StartSidecar(t, harness.SidecarOptions{Env: s.env(s.samlAddr, false, nil)})

	// Before sign-on the Check has no token.
	if out := samlCheck(t, sc, "/orders/7", ""); code.Code(out.GetStatus().GetCode()) == code.Code_OK {
		t.Fatal("Check without a session allowed")
	}
	resp := samlLogin(t, noRedirect, "http://"+s.samlAddr+"/auth/saml/login?return_to="+url.QueryEscape("/orders/7"))
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, s.idp.BaseURL+"/sso?") {
		t.Fatalf("login: %d Location %q, want 302 to the IdP's SSO", resp.StatusCode, loc)
	}
	a := askIdP(t, loc+"&user=alice")
	if a.RelayState != "/orders/7" {
		t.Errorf("RelayState through the IdP = %q", a.RelayState)
	}
	acs := postACS(t, s.samlAddr, a)
	if acs.StatusCode != http.StatusSeeOther || acs.Header.Get("Location") != "/orders/7" {
		t.Fatalf("ACS: %d Location %q code %q, want 303 to /orders/7", acs.StatusCode, acs.Header.Get("Location"), refusalCode(t, acs))
	}
	cookie := sessionCookie(acs)
	if cookie == "" {
		t.Fatal("no session cookie")
	}
	out := samlCheck(t, sc, "/orders/7", cookie)
	if code.Code(out.GetStatus().GetCode()) != code.Code_OK {
		t.Fatalf("Check with the session cookie denied: %v", out.GetDeniedResponse().GetBody())
	}
	headers := map[string]string{}
	for _, h := range out.GetOkResponse().GetHeaders() {
		headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	if headers["x-svc-user-id"] != "alice@example.com" || headers["x-svc-tenant-id"] != "acme" || headers["x-svc-roles"] != "admin" {
		t.Errorf("upstream identity %v, want alice@example.com / acme / admin", headers)
	}

	// The same response again is a replay.
	if again := postACS(t, s.samlAddr, a); again.StatusCode != http.StatusUnauthorized || refusalCode(t, again) != "saml-replayed" {
		t.Errorf("replayed response: %d", again.StatusCode)
	}
	// IdP-initiated sign-on is refused while allow_idp_initiated is false.
	un := postACS(t, s.samlAddr, askIdP(t, s.idp.BaseURL+"/idp-initiated?user=bob"))
	if got := refusalCode(t, un); un.StatusCode != http.StatusUnauthorized || got != "saml-unsolicited" {
		t.Errorf("unsolicited response: %d %q, want 401 saml-unsolicited", un.StatusCode, got)
	}
}

// IdP-initiated sign-on when allowed, refused without a tenant; and two
// sidecars sharing one real Redis refuse a response replayed across them
// and complete a login that the other one started.
func TestSAMLIdPInitiatedAndSharedReplayCache(t *testing.T) {
	s := startSAMLIdP(t)
	redisAddr := redistest.Start(t)
	// A generous Redis timeout: under load a first call (dial, handshake)
	// can take longer than the default, and a replay-cache write whose
	// reply timed out would make the retried response a replay.
	extra := map[string]string{"SVC_REDIS_ADDR": redisAddr, "SVC_REDIS_TIMEOUT": "10s"}
	a := harness.StartSidecar(t, harness.SidecarOptions{Env: s.env(s.samlAddr, true, extra)})
	otherAddr := harness.FreeAddr(t)
	harness.StartSidecar(t, harness.SidecarOptions{Env: s.env(otherAddr, true, extra)})

	var ans idpAnswer
	var first *http.Response
	deadline := time.Now().Add(20 * time.Second)
	for {
		ans = askIdP(t, s.idp.BaseURL+"/idp-initiated?user=carol&relay_state=/reports")
		first = postACS(t, s.samlAddr, ans)
		if first.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if first.StatusCode != http.StatusSeeOther || sessionCookie(first) == "" {
		t.Fatalf("IdP-initiated on sidecar A: %d %q", first.StatusCode, refusalCode(t, first))
	}
	if out := samlCheck(t, a, "/orders/1", sessionCookie(first)); code.Code(out.GetStatus().GetCode()) == code.Code_OK {
		// carol is of tenant globex; the deployment is acme.
		t.Error("a globex user was allowed on the acme deployment")
	}
	// The same response at the other replica: refused through Redis.
	var replay *http.Response
	for {
		replay = postACS(t, otherAddr, ans)
		if replay.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := refusalCode(t, replay); replay.StatusCode != http.StatusUnauthorized || got != "saml-replayed" {
		t.Fatalf("replay on sidecar B: %d %q, want 401 saml-replayed", replay.StatusCode, got)
	}
	// A fresh response is accepted by B too.
	if ok := postACS(t, otherAddr, askIdP(t, s.idp.BaseURL+"/idp-initiated?user=bob")); ok.StatusCode != http.StatusSeeOther {
		t.Errorf("fresh response on sidecar B: %d %q", ok.StatusCode, refusalCode(t, ok))
	}
	// A login started at B is answered at A: the replicas share the
	// request key through Redis.
	resp, err := noRedirect.Get("http://" + otherAddr + "/auth/saml/login?return_to=/reports")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("login at B: %d", resp.StatusCode)
	}
	if sp := postACS(t, s.samlAddr, askIdP(t, resp.Header.Get("Location")+"&user=bob")); sp.StatusCode != http.StatusSeeOther {
		t.Errorf("answer at A to a login started at B: %d %q", sp.StatusCode, refusalCode(t, sp))
	}
	// A user without the tenant attribute is refused.
	nt := postACS(t, s.samlAddr, askIdP(t, s.idp.BaseURL+"/idp-initiated?user=nora"))
	if got := refusalCode(t, nt); nt.StatusCode != http.StatusForbidden || got != "saml-tenant-missing" {
		t.Errorf("no tenant: %d %q, want 403 saml-tenant-missing", nt.StatusCode, got)
	}
	// Each refusal is audited with its code.
	var refused []string
	for _, r := range a.AuditRecords(t) {
		if r["source"] == "saml" && r["allow"] == false {
			refused = append(refused, r["reason"].(string))
		}
	}
	if !strings.Contains(strings.Join(refused, ","), "saml-tenant-missing") {
		t.Errorf("audit refusals on A = %v, want saml-tenant-missing among them", refused)
	}
}
