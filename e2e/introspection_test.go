package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// introspectionEnv is the environment of a sidecar whose one identity
// source is the introspection endpoint url, asked as client id with
// secret (written to a file, as the secret must be).
func introspectionEnv(t *testing.T, url, id, secret string) map[string]string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "introspection-secret")
	testkit.WriteFile(t, file, []byte(secret+"\n"))
	return map[string]string{
		"SVC_INTROSPECTION_URL": url, "SVC_INTROSPECTION_CLIENT_ID": id, "SVC_INTROSPECTION_CLIENT_SECRET_FILE": file,
	}
}

func bearer(tok string) map[string]string { return map[string]string{"authorization": "Bearer " + tok} }

// Opaque access tokens of the real oidc-provider are accepted by a
// sidecar that asks the provider's introspection endpoint about them;
// an unknown token is token-inactive, and once the provider is gone a
// token already vouched for keeps passing while a new one is
// introspection-unavailable, a 503 for the proxy's fail mode to decide.
func TestIntrospection(t *testing.T) {
	idp := harness.StartIDP(t, "urn:orders", 5*time.Minute,
		harness.IDPClient{ID: "svc-introspector", Secret: "introspector-secret-0123456789"},
		harness.IDPClient{ID: "orders-job", Secret: "job-secret-0123456789abcdef", TenantID: "acme", Roles: []string{"viewer"}, Opaque: true},
		harness.IDPClient{ID: "orders-admin", Secret: "admin-secret-0123456789abcdef", TenantID: "acme", Roles: []string{"admin"}, Opaque: true},
	)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig,
		Env: introspectionEnv(t, idp.IntrospectionURL, "svc-introspector", "introspector-secret-0123456789")})
	if st := getStatus(t, s); st.DevMode || st.Introspection == nil || st.Introspection.URL != idp.IntrospectionURL {
		t.Fatalf("status: dev mode %v, introspection %+v; want the endpoint and no development mode", st.DevMode, st.Introspection)
	}
	job, admin := idp.Token(t, "orders-job"), idp.Token(t, "orders-admin")
	if strings.Count(job, ".") == 2 {
		t.Fatalf("the provider issued a JWT (%d bytes) where an opaque token was asked for", len(job))
	}

	r := envoyCheckHeaders(t, s, "GET", "/orders/1", bearer(job), nil)
	if r.status != http.StatusOK || r.headers["x-svc-user-id"] != "orders-job" || r.headers["x-svc-tenant-id"] != "acme" {
		t.Fatalf("viewer reading: status %d, headers %v, body %s; want 200 as orders-job of acme", r.status, r.headers, r.body)
	}
	if r := envoyCheckHeaders(t, s, "DELETE", "/orders/1", bearer(job), nil); r.status != http.StatusForbidden {
		t.Errorf("viewer deleting: status %d, want 403 from the default policy", r.status)
	}
	if r := envoyCheckHeaders(t, s, "DELETE", "/orders/1", bearer(admin), nil); r.status != http.StatusOK {
		t.Errorf("admin deleting: status %d %s, want 200", r.status, r.body)
	}
	status, rc, h := httpCheck(t, s, "/orders/1", map[string]string{"Authorization": "Bearer never-issued-0123456789"})
	if status != http.StatusUnauthorized || rc != "token-inactive" || !strings.Contains(h.Get("WWW-Authenticate"), "token-inactive") {
		t.Errorf("unknown opaque token: %d %s (%q), want 401 token-inactive", status, rc, h.Get("WWW-Authenticate"))
	}

	idp.Stop(t)
	if r := envoyCheckHeaders(t, s, "GET", "/orders/1", bearer(job), nil); r.status != http.StatusOK {
		t.Errorf("provider gone, token vouched for: status %d %s, want 200 from the cached answer", r.status, r.body)
	}
	r = envoyCheckHeaders(t, s, "GET", "/orders/1", bearer("issued-while-down-0123456789"), nil)
	if r.status != http.StatusServiceUnavailable || denyReason(r.body) != "introspection-unavailable" {
		t.Errorf("provider gone, new token: status %d %s, want 503 introspection-unavailable", r.status, r.body)
	}
	st := getStatus(t, s).Introspection
	if st == nil || st.Failures == 0 || st.LastError == "" || st.LastErrorAt == nil || st.CacheEntries < 3 {
		t.Errorf("status after the outage: %+v", st)
	}
	if strings.Contains(st.LastError, "introspector-secret") {
		t.Errorf("the status shows the client secret: %q", st.LastError)
	}
	warned := false
	for _, rec := range s.LogRecords(t) {
		line := fmt.Sprint(rec)
		for _, secret := range []string{job, admin, "issued-while-down", "never-issued", "introspector-secret"} {
			if strings.Contains(line, secret) {
				t.Errorf("a log record holds a token or the secret: %s", line)
			}
		}
		if msg, _ := rec["msg"].(string); strings.HasPrefix(msg, "introspection endpoint failing") {
			warned = true
		}
	}
	if !warned {
		t.Error("no warning logged while the endpoint was down")
	}
}

// An endpoint that answers something other than an RFC 7662 answer (not
// JSON, or over 64 KiB) gets introspection-invalid and nothing more.
func TestIntrospectionBadAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.PostFormValue("token") {
		case "answered-with-html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body>Bad Gateway</body></html>"))
		case "answered-too-long":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"active":true,"sub":"a","tenant_id":"acme","pad":"` + strings.Repeat("x", 70<<10) + `"}`))
		default:
			_, _ = w.Write([]byte(`{"active":false}`))
		}
	}))
	t.Cleanup(srv.Close)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig, Env: introspectionEnv(t, srv.URL, "svc", "s3cret")})
	for _, tok := range []string{"answered-with-html", "answered-too-long"} {
		r := envoyCheckHeaders(t, s, "GET", "/orders/1", bearer(tok), nil)
		if r.status != http.StatusServiceUnavailable || denyReason(r.body) != "introspection-invalid" {
			t.Errorf("%s: status %d %s, want 503 introspection-invalid", tok, r.status, r.body)
		}
	}
}

// A bearer with the API-key prefix is an API key on every door of a
// sidecar that also introspects: Envoy's Check, the HTTP check and the
// API judge it against the key file, and the introspection endpoint,
// which would vouch for anything, is never asked about it.
func TestIntrospectionNeverSeesAPIKeys(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"active":true,"sub":"mallory","tenant_id":"acme","roles":["admin"]}`))
	}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "api-keys.toml")
	viewer := coreAPIKey(t, "create", "--file", file, "--tenant", "acme", "--subject", "reporting", "--role", "viewer")
	env := introspectionEnv(t, srv.URL, "svc", "s3cret")
	env["SVC_API_KEYS_FILE"] = file
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig, Env: env})

	if r := envoyCheckHeaders(t, s, "GET", "/orders/1", bearer(viewer), nil); r.status != http.StatusOK || r.headers["x-svc-user-id"] != "reporting" {
		t.Errorf("Check with the key as bearer: status %d, headers %v, body %s; want 200 as reporting", r.status, r.headers, r.body)
	}
	if r := envoyCheckHeaders(t, s, "DELETE", "/orders/1", bearer(viewer), nil); r.status != http.StatusForbidden {
		t.Errorf("Check, the viewer key deleting: status %d %s, want 403", r.status, r.body)
	}
	if status, rc, h := httpCheck(t, s, "/orders/1", map[string]string{"Authorization": "Bearer " + testkit.WrongSecret(viewer)}); status != http.StatusUnauthorized ||
		rc != "api-key-unknown" || !strings.HasPrefix(h.Get("WWW-Authenticate"), "ApiKey") {
		t.Errorf("HTTP check with a wrong key as bearer: %d %s (%q), want 401 api-key-unknown challenged as ApiKey", status, rc, h.Get("WWW-Authenticate"))
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL("/v1/authorize"), strings.NewReader(`{"action":"orders:delete"}`))
	req.Header.Set("Authorization", "Bearer svck_not-a-key")
	if status, _, body := harness.Do(t, req); status != http.StatusOK || !strings.Contains(string(body), `"api-key-malformed"`) {
		t.Errorf("POST /v1/authorize with a malformed key as bearer: %d %s, want api-key-malformed", status, body)
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the introspection endpoint was asked %d times about API keys", n)
	}
}
