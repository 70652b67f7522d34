package e2e

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// samlOnlyDeployment is the SAML-only configuration of a real deployment
// as an operator writes it: IdP metadata, a token signing key, Redis and
// an admin token, and no sdk.fail_mode (so its default, open). The
// gateway listens on listen and is reached, by the IdP's browsers and by
// the tests, at samlAddr (the same port on 127.0.0.1).
func samlOnlyDeployment(t *testing.T, idp *testidp.IdP, listen, samlAddr, redisAddr string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{
		"SVC_SAML_ADDR":                   listen,
		"SVC_SAML_ENTITY_ID":              "http://" + samlAddr + "/auth/saml/metadata",
		"SVC_SAML_ACS_URL":                "http://" + samlAddr + "/auth/saml/acs",
		"SVC_SAML_IDP_METADATA_FILE":      harness.WriteFile(t, dir, "idp.xml", string(idp.Metadata())),
		"SVC_SAML_TOKEN_SIGNING_KEY_FILE": testkit.TokenKeyFile(t),
		"SVC_ADMIN_TOKEN_FILE":            harness.WriteFile(t, dir, "admin-token", "e2e-admin-token-0123456789abcdef\n"),
	}
	if redisAddr != "" {
		env["SVC_REDIS_ADDR"] = redisAddr
		env["SVC_REDIS_TIMEOUT"] = "10s" // a first call under load (dial, handshake) may be slow
	}
	return env
}

// public is addr (127.0.0.1:port) on every interface: 0.0.0.0:port.
func public(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("0.0.0.0", port)
}

// wantRefusal checks that the last line of a refused start says each of
// wants.
func wantRefusal(t *testing.T, last string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(last, want) {
			t.Errorf("last line of stderr %q does not say %q", last, want)
		}
	}
}

// The attack of a SAML-only deployment: SVC_ENV=development left in its
// environment used to count it as a development one (no jwks_url,
// fail_mode open by default), so an unsigned assertion for role=admin
// got a session token. Development mode is now the absence of every
// identity source, and the signature switch needs every listener on
// loopback and no other identity source: on a public sign-in listener,
// on a public gRPC listener, or beside sdk.jwks_url, the sidecar refuses
// to start, naming SVC_ENV and what makes the configuration a production
// one. Without the variable the same deployment starts and refuses the
// unsigned assertion.
func TestDevModeAttackSAMLOnlySignatureSwitch(t *testing.T) {
	idp := exampleIdP(t)
	redisAddr := redistest.Start(t)
	samlAddr := harness.FreeAddr(t)
	jwks := harness.StartJWKS(t, harness.NewECSigner(t, "idp"))

	refused := []struct {
		name  string
		edit  func(env map[string]string)
		wants []string
	}{
		{"sign-in listener on every interface", func(env map[string]string) {},
			[]string{`sidecar.saml_addr (SVC_SAML_ADDR) "` + public(t, samlAddr) + `" is not a loopback address`}},
		{"gRPC listener on every interface", func(env map[string]string) {
			env["SVC_SAML_ADDR"] = samlAddr
			env["SVC_SIDECAR_ADDR"] = public(t, harness.FreeAddr(t))
		}, []string{`sdk.sidecar_addr (SVC_SIDECAR_ADDR) "0.0.0.0:`, "is not a loopback address"}},
		{"jwks_url beside [sdk.saml], all on loopback", func(env map[string]string) {
			env["SVC_SAML_ADDR"] = samlAddr
			env["SVC_JWKS_URL"] = jwks.URL
		}, []string{"sdk.jwks_url (SVC_JWKS_URL) is set"}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			env := samlOnlyDeployment(t, idp, public(t, samlAddr), samlAddr, redisAddr)
			env["SVC_ENV"] = "development"
			tc.edit(env)
			wantRefusal(t, failedStart(t, env), append([]string{"svc-sidecar: ", "SVC_ENV", "unset SVC_ENV"}, tc.wants...)...)
		})
	}

	// The deployment as it runs, without the variable: the attacker's
	// unsigned assertion for an admin, answering a sign-on the
	// attacker's own browser started, is refused and sets no session.
	harness.StartSidecar(t, harness.SidecarOptions{Env: samlOnlyDeployment(t, idp, public(t, samlAddr), samlAddr, redisAddr)})
	attacker := newBrowser()
	id := requestIDOf(t, loginFrom(t, attacker, samlAddr, "/orders/1"))
	if status, body := postJSON(t, attacker, samlAddr, idp.XML(adminAssertion(samlAddr, id), false)); status != http.StatusUnauthorized ||
		body["error"] != "saml-signature-invalid" || body["token"] != nil {
		t.Errorf("unsigned admin assertion: %d %v, want 401 saml-signature-invalid without a token", status, body)
	}
}

// A local trial of the gateway, the same SAML-only configuration with
// every listener on loopback, keeps SVC_ENV=development: an identity
// provider that does not sign can be tried. The sidecar never reads
// healthy meanwhile: its status is degraded with reason
// saml-signature-check-disabled.
func TestDevModeLocalTrialIsDegraded(t *testing.T) {
	idp := exampleIdP(t)
	samlAddr := harness.FreeAddr(t)
	env := samlOnlyDeployment(t, idp, samlAddr, samlAddr, "")
	env["SVC_ENV"] = "development"
	sc := harness.StartSidecar(t, harness.SidecarOptions{Env: env})

	st := getStatus(t, sc)
	if st.Status != "degraded" || st.Reason != "saml-signature-check-disabled" || !st.Ready || st.SAML == nil || !st.SAML.SignatureCheckDisabled {
		t.Errorf("status %+v, want degraded, reason saml-signature-check-disabled, ready, saml.signature_check_disabled", st)
	}
	if st.DevMode {
		t.Error("dev_mode true: a SAML-only sidecar verifies every bearer")
	}

	browser := newBrowser()
	id := requestIDOf(t, loginFrom(t, browser, samlAddr, "/"))
	code, body := postJSON(t, browser, samlAddr, idp.XML(adminAssertion(samlAddr, id), false))
	if token, _ := body["token"].(string); code != http.StatusOK || token == "" {
		t.Errorf("unsigned assertion in the local trial: %d %v, want 200 with a token", code, body)
	}
	// Development mode stays off: a bearer the gateway did not issue is
	// refused, not taken as anonymous.
	req, _ := http.NewRequest(http.MethodPost, sc.URL("/v1/validate-token"), nil)
	req.Header.Set("Authorization", "Bearer any-string-at-all")
	if code, h, raw := harness.Do(t, req); code != http.StatusOK || !strings.Contains(string(raw), `"allowed":false`) {
		t.Errorf("validate-token of an arbitrary bearer: %s, want allowed false", harness.Describe(code, h, raw))
	}
}

// IdP-initiated sign-on without Redis keeps its replay cache in one
// process, so another replica or a restart accepts an unsolicited
// assertion again. On a public sign-in listener the sidecar refuses to
// start, naming both settings and the listener; on loopback (the local
// round trip of docs/saml.md) it starts and accepts a signed unsolicited
// assertion once.
func TestDevModeAttackIdPInitiatedWithoutRedis(t *testing.T) {
	idp := exampleIdP(t)
	samlAddr := harness.FreeAddr(t)
	env := samlOnlyDeployment(t, idp, public(t, samlAddr), samlAddr, "")
	env["SVC_SAML_ALLOW_IDP_INITIATED"] = "true"
	wantRefusal(t, failedStart(t, env), "SVC_SAML_ALLOW_IDP_INITIATED", "rate_limit.redis_addr",
		`sidecar.saml_addr (SVC_SAML_ADDR) "`+public(t, samlAddr)+`" is not a loopback address`)

	env["SVC_SAML_ADDR"] = samlAddr
	harness.StartSidecar(t, harness.SidecarOptions{Env: env})
	idpInitiatedOnce(t, idp, samlAddr, "IdP-initiated on loopback")
}
