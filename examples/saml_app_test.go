package examples

import (
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/samltest"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// TestSAMLAppSignOn runs examples/saml-app as a user would, with the test
// identity provider, and follows a sign-on as a browser: the protected
// route refuses a request without a session, the login redirects to the
// IdP, the IdP's signed answer posted to the ACS sets the session cookie,
// and the route then admits the user from the cookie alone, with the
// claims of the assertion; a forged cookie is refused.
func TestSAMLAppSignOn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "saml-app")
	if out, err := exec.Command("go", "build", "-o", bin, "./saml-app").CombinedOutput(); err != nil {
		t.Fatalf("go build ./saml-app: %v\n%s", err, out)
	}
	idp := samltest.New(t)
	md := samltest.MetadataFile(t, idp)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	base := "http://" + addr
	entityID, acs := base+"/auth/saml/metadata", base+"/auth/saml/acs"

	cmd := exec.Command(bin)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "APP_ADDR="+addr, "SVC_SAML_ENTITY_ID="+entityID, "SVC_SAML_ACS_URL="+acs,
		"SVC_SAML_IDP_METADATA_FILE="+md, "SVC_TENANT_ID=acme", "SVC_FAIL_MODE=closed")
	// Read while the app runs: a buffer safe for that.
	var stderr testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	testkit.Poll(t, 30*time.Second, "saml-app to listen on "+addr, func() (bool, string) {
		resp, err := browser.Get(base + "/auth/saml/metadata")
		if err == nil {
			resp.Body.Close()
			return true, ""
		}
		select {
		case err := <-exited:
			t.Fatalf("saml-app exited: %v\n%s", err, stderr.String())
		default:
		}
		return false, fmt.Sprintf("%v\n%s", err, stderr.String())
	})

	get := func(c *http.Client, header http.Header) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, base+"/orders/7", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, b := testkit.Do(t, c, req)
		return resp.StatusCode, string(b)
	}
	if code, body := get(browser, nil); code != http.StatusUnauthorized || !strings.Contains(body, `"token-missing"`) {
		t.Fatalf("before sign-on: %d %s, want 401 token-missing", code, body)
	}

	// The login redirects to the IdP with an AuthnRequest.
	resp, err := browser.Get(base + "/auth/saml/login?return_to=/orders/7")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("login: %d, want 302\n%s", resp.StatusCode, stderr.String())
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	requestID := authnRequestID(t, loc.Query().Get("SAMLRequest"))

	// The IdP answers; the browser posts the answer to the ACS.
	doc, err := idp.Sign(testidp.Response{
		InResponseTo: requestID, Destination: acs, Recipient: acs, Audience: entityID,
		NameID: "alice@example.com",
		Attributes: []testidp.Attribute{
			{Name: config.DefaultSAMLEmailAttribute, Values: []string{"alice@example.com"}},
			{Name: "role", Values: []string{"viewer"}},
			{Name: "tenant_id", Values: []string{"acme"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}, "RelayState": {"/orders/7"}}
	resp, err = browser.PostForm(acs, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/orders/7" {
		t.Fatalf("ACS: %d to %q, want 303 to /orders/7\n%s", resp.StatusCode, resp.Header.Get("Location"), stderr.String())
	}
	var session string
	u, _ := url.Parse(base)
	for _, c := range jar.Cookies(u) {
		if c.Name == "svc_session" {
			session = c.Value
		}
	}
	if session == "" {
		t.Fatal("the ACS set no svc_session cookie")
	}

	code, body := get(browser, nil)
	if code != http.StatusOK || !strings.Contains(body, "orders of alice@example.com in tenant \"acme\", roles [viewer]") {
		t.Fatalf("with the session cookie: %d %s, want 200 for alice", code, body)
	}
	// A cookie the gateway did not issue is refused, and an Authorization
	// header is never replaced by the cookie.
	plain := &http.Client{Timeout: 10 * time.Second}
	forged := session[:len(session)-4] + "AAAA"
	if code, body := get(plain, http.Header{"Cookie": {"svc_session=" + forged}}); code != http.StatusUnauthorized || !strings.Contains(body, "signature-invalid") {
		t.Errorf("forged cookie: %d %s, want 401 signature-invalid", code, body)
	}
	if code, body := get(plain, http.Header{"Cookie": {"svc_session=" + session}, "Authorization": {"Basic YTpi"}}); code != http.StatusUnauthorized {
		t.Errorf("cookie with a Basic Authorization header: %d %s, want 401", code, body)
	}
	if code, body := get(plain, http.Header{"Authorization": {"Bearer " + session}}); code != http.StatusOK {
		t.Errorf("the session token as a bearer: %d %s, want 200", code, body)
	}
}

// authnRequestID returns the ID of an HTTP-Redirect AuthnRequest.
func authnRequestID(t *testing.T, param string) string {
	t.Helper()
	doc := samltest.RedirectRequest(t, param)
	var req struct {
		ID string `xml:"ID,attr"`
	}
	if err := xml.Unmarshal(doc, &req); err != nil || req.ID == "" {
		t.Fatalf("AuthnRequest %q: %v", doc, err)
	}
	return req.ID
}
