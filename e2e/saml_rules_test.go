package e2e

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/internal/testkit/samltest"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// loginFrom starts SP-initiated sign-on at samlAddr from browser and
// returns where the gateway sends the browser (loginRedirect).
func loginFrom(t *testing.T, browser *http.Client, samlAddr, returnTo string) string {
	t.Helper()
	return loginRedirect(t, browser, "http://"+samlAddr, returnTo)
}

// Login CSRF against the real binary and samlify: an attacker signs in at
// the IdP with their own account through a sign-on they started, and has
// the victim's browser post the IdP's answer to the ACS (an auto-posted
// form on the attacker's page). The gateway refuses it, whether or not
// the victim has a sign-on of their own pending, and sets no session.
func TestSAMLLoginCSRFRefused(t *testing.T) {
	s := startSAMLIdP(t)
	sc := harness.StartSidecar(t, harness.SidecarOptions{Env: s.env(s.samlAddr, false, nil)})
	attacker := newBrowser()

	for _, victimPending := range []bool{false, true} {
		victim := newBrowser()
		if victimPending {
			loginFrom(t, victim, s.samlAddr, "/")
		}
		ans := askIdP(t, loginFrom(t, attacker, s.samlAddr, "/orders/1")+"&user=bob")
		resp := postACSFrom(t, victim, s.samlAddr, ans)
		if got := refusalCode(t, resp); resp.StatusCode != http.StatusUnauthorized || got != "saml-request-not-bound" {
			t.Fatalf("attacker's answer from the victim's browser (victim pending %v): %d %q, want 401 saml-request-not-bound",
				victimPending, resp.StatusCode, got)
		}
		if sessionCookie(resp) != "" {
			t.Error("the refusal set a session cookie")
		}
	}
	// The binding is all that stops it: in the browser that started it,
	// the same kind of answer signs in.
	ok := postACSFrom(t, attacker, s.samlAddr, askIdP(t, loginFrom(t, attacker, s.samlAddr, "/orders/1")+"&user=bob"))
	if ok.StatusCode != http.StatusSeeOther || sessionCookie(ok) == "" {
		t.Fatalf("answer in the browser that started the sign-on: %d %q, want 303 with a session", ok.StatusCode, refusalCode(t, ok))
	}
	var refused int
	for _, r := range sc.AuditRecords(t) {
		if r["source"] == "saml" && r["reason"] == "saml-request-not-bound" && r["allow"] == false {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("%d audit records of saml-request-not-bound, want 2", refused)
	}
}

// samlProduction is a production configuration of a SAML-only sidecar
// (fail closed, signed policy bundles, an admin token) trusting idp,
// with its SAML listener at samlAddr.
func samlProduction(t *testing.T, idp *testidp.IdP, samlAddr string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	return map[string]string{
		"SVC_FAIL_MODE":              "closed",
		"SVC_BUNDLE_VERIFY_KEY_FILE": harness.WriteFile(t, dir, "bundle.pub", string(harness.NewECSigner(t, "bundle").PublicPEM(t))),
		"SVC_ADMIN_TOKEN_FILE":       harness.WriteFile(t, dir, "admin-token", "e2e-admin-token-0123456789abcdef\n"),
		"SVC_SAML_ADDR":              samlAddr,
		"SVC_SAML_ENTITY_ID":         "http://" + samlAddr + "/auth/saml/metadata",
		"SVC_SAML_ACS_URL":           "http://" + samlAddr + "/auth/saml/acs",
		"SVC_SAML_IDP_METADATA_FILE": harness.WriteFile(t, dir, "idp.xml", string(idp.Metadata())),
	}
}

// generateIdP is testidp.Generate, failing the test on error.
func generateIdP(t testing.TB, entityID, ssoURL string) *testidp.IdP {
	t.Helper()
	idp, err := testidp.Generate(entityID, ssoURL)
	if err != nil {
		t.Fatal(err)
	}
	return idp
}

// keyOnlyIdP is an IdP whose key pair alone serves.
func keyOnlyIdP(t testing.TB) *testidp.IdP {
	t.Helper()
	return generateIdP(t, "unused", "unused")
}

// exampleIdP is an IdP of its own at https://idp.example.com/saml.
func exampleIdP(t testing.TB) *testidp.IdP {
	t.Helper()
	return generateIdP(t, "https://idp.example.com/saml", "https://idp.example.com/saml/sso")
}

// adminAssertion is an assertion of an admin of tenant acme for the SP
// at samlAddr, answering the request inResponseTo ("" for IdP-initiated).
func adminAssertion(samlAddr, inResponseTo string) testidp.Response {
	acs := "http://" + samlAddr + "/auth/saml/acs"
	return testidp.Response{
		Destination: acs, Recipient: acs, Audience: "http://" + samlAddr + "/auth/saml/metadata",
		NameID: "mallory@example.com", InResponseTo: inResponseTo,
		Attributes: []testidp.Attribute{{Name: "role", Values: []string{"admin"}}, {Name: "tenant_id", Values: []string{harness.DefaultTenant}}},
	}
}

// postJSON posts a SAMLResponse to the ACS as an API client, from browser.
func postJSON(t *testing.T, browser *http.Client, samlAddr string, doc []byte) (int, map[string]any) {
	t.Helper()
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+samlAddr+"/auth/saml/acs", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// requestIDOf returns the AuthnRequest id in a login's redirect.
func requestIDOf(t *testing.T, location string) string {
	t.Helper()
	u, err := url.Parse(location)
	if err != nil {
		t.Fatal(err)
	}
	xml := string(samltest.RedirectRequest(t, u.Query().Get("SAMLRequest")))
	_, rest, ok := strings.Cut(xml, ` ID="`)
	id, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 {
		t.Fatalf("no ID in the AuthnRequest %s", xml)
	}
	return id
}

// failedStart launches a sidecar that must refuse to start and returns
// its stderr.
func failedStart(t *testing.T, env map[string]string) string {
	t.Helper()
	return failedStartWith(t, harness.SidecarOptions{Env: env})
}

// failedStartWith is failedStart with opts (a configuration file too).
func failedStartWith(t *testing.T, opts harness.SidecarOptions) string {
	t.Helper()
	s := harness.LaunchSidecar(t, opts)
	code := s.Wait(t, exitTimeout)
	stderr := strings.TrimSpace(s.Stderr.String())
	if code <= 0 {
		t.Fatalf("sidecar exit code %d, want a refusal to start (exit 1); stderr:\n%s", code, stderr)
	}
	lines := strings.Split(stderr, "\n")
	return lines[len(lines)-1]
}

// IdP-initiated sign-on in production (here: the sign-in listener on
// every interface) needs the replay cache replicas and restarts share:
// without Redis the sidecar refuses to start, naming both settings; with
// it, an unsolicited assertion is accepted once.
func TestSAMLIdPInitiatedNeedsRedisInProduction(t *testing.T) {
	idp := exampleIdP(t)
	samlAddr := harness.FreeAddr(t)
	env := samlProduction(t, idp, samlAddr)
	env["SVC_SAML_ADDR"] = public(t, samlAddr)
	env["SVC_SAML_ALLOW_IDP_INITIATED"] = "true"
	last := failedStart(t, env)
	for _, want := range []string{"SVC_SAML_ALLOW_IDP_INITIATED", "rate_limit.redis_addr"} {
		if !strings.Contains(last, want) {
			t.Errorf("last line of stderr %q does not mention %q", last, want)
		}
	}

	env["SVC_REDIS_ADDR"] = redistest.Start(t)
	env["SVC_REDIS_TIMEOUT"] = "10s" // a first call under load (dial, handshake) may be slow
	harness.StartSidecar(t, harness.SidecarOptions{Env: env})
	idpInitiatedOnce(t, idp, samlAddr, "IdP-initiated with Redis")
}

// idpInitiatedOnce posts an unsolicited assertion idp signed for the admin
// to the sign-in listener at samlAddr, twice, each from a new browser:
// the first is taken (what names it), the second refused as
// saml-replayed.
func idpInitiatedOnce(t *testing.T, idp *testidp.IdP, samlAddr, what string) {
	t.Helper()
	doc, err := idp.Sign(adminAssertion(samlAddr, ""))
	if err != nil {
		t.Fatal(err)
	}
	if status, body := postJSON(t, newBrowser(), samlAddr, doc); status != http.StatusOK {
		t.Fatalf("%s: %d %v, want 200", what, status, body)
	}
	if status, body := postJSON(t, newBrowser(), samlAddr, doc); status != http.StatusUnauthorized || body["error"] != "saml-replayed" {
		t.Errorf("the same assertion again: %d %v, want 401 saml-replayed", status, body)
	}
}

// A configuration read again on SIGHUP that would make SVC_ENV=development
// refused (here: the sign-in listener moved to every interface) is itself
// refused: the running local trial keeps serving instead of handing over
// to an image that cannot start.
func TestSAMLDevelopmentEnvSIGHUP(t *testing.T) {
	idp := exampleIdP(t)
	samlAddr := harness.FreeAddr(t)
	dir := t.TempDir()
	md := harness.WriteFile(t, dir, "idp.xml", string(idp.Metadata()))
	saml := "[sdk.saml]\nentity_id = \"http://" + samlAddr + "/auth/saml/metadata\"\nacs_url = \"http://" + samlAddr +
		"/auth/saml/acs\"\nidp_metadata_file = \"" + md + "\"\n"
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: "[sidecar]\nsaml_addr = \"" + samlAddr + "\"\n" + saml,
		Env: map[string]string{"SVC_ENV": "development", "SVC_LOG_LEVEL": "info"}})
	first := statusOf(t, s)

	harness.WriteFile(t, s.Dir, "svc.toml", "[sidecar]\nsaml_addr = \""+public(t, samlAddr)+"\"\n"+saml)
	if err := s.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	out, err := s.WaitOutput(t, true, time.Minute, func(out string) bool {
		return strings.Contains(out, "SIGHUP: configuration refused")
	})
	if err != nil {
		t.Fatalf("no refusal logged: %v", err)
	}
	refusal := out[strings.Index(out, "SIGHUP: configuration refused"):]
	for _, want := range []string{"SVC_ENV", "sidecar.saml_addr", "is not a loopback address"} {
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	if st := statusOf(t, s); !st.StartedAt.Equal(first.StartedAt) || st.Status != "degraded" {
		t.Errorf("after the refused configuration: %+v, want the same image, degraded (signature checks off)", st)
	}
}
