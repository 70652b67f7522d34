package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// coreAPIKey runs core api-key with args and returns its stdout.
func coreAPIKey(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(harness.Binary(t, "core"), append([]string{"api-key"}, args...)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("core api-key %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// httpCheck asks the sidecar's /check, as nginx's auth_request does, for
// GET path with headers; it returns the status and the body's reason.
func httpCheck(t *testing.T, s *harness.Sidecar, path string, headers map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL("/check"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Original-URI", path)
	req.Header.Set("X_Svc_Method", http.MethodGet)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	status, h, body := harness.Do(t, req)
	return status, denyReason(string(body)), h
}

// API keys made with core api-key are accepted on every surface of a
// sidecar whose only identity source is the key file; a wrong secret, a
// revoked key and a file holding a plaintext key are refused, the last
// with the previous keys kept in force.
func TestAPIKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-keys.toml")
	admin := coreAPIKey(t, "create", "--file", file, "--tenant", "acme", "--subject", "ci-deployer", "--role", "admin")
	viewer := coreAPIKey(t, "create", "--file", file, "--tenant", "acme", "--subject", "reporting", "--role", "viewer", "--expires", "720h")
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v; want mode 0600", fi, err)
	}
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig, Env: map[string]string{"SVC_API_KEYS_FILE": file}})
	if st := getStatus(t, s); st.DevMode || st.APIKeys == nil || st.APIKeys.Keys != 2 {
		t.Fatalf("status: dev mode %v, api keys %+v; want 2 keys and no development mode", st.DevMode, st.APIKeys)
	}

	t.Run("envoy check", func(t *testing.T) {
		for name, h := range map[string]map[string]string{
			"x-api-key":            {"x-api-key": admin},
			"authorization apikey": {"authorization": "ApiKey " + admin},
		} {
			r := envoyCheckHeaders(t, s, "DELETE", "/orders/1", h, nil)
			if r.status != http.StatusOK || r.headers["x-svc-user-id"] != "ci-deployer" || r.headers["x-svc-tenant-id"] != "acme" {
				t.Errorf("%s: status %d, headers %v, body %s; want 200 as ci-deployer of acme", name, r.status, r.headers, r.body)
			}
		}
		if r := envoyCheckHeaders(t, s, "DELETE", "/orders/1", map[string]string{"x-api-key": viewer}, nil); r.status != http.StatusForbidden {
			t.Errorf("viewer deleting: status %d, want 403 from the default policy", r.status)
		}
	})
	t.Run("http check", func(t *testing.T) {
		for name, h := range map[string]map[string]string{
			"X-Api-Key":             {"X-Api-Key": viewer},
			"Authorization: ApiKey": {"Authorization": "ApiKey " + viewer},
		} {
			if status, rc, hdr := httpCheck(t, s, "/orders/1", h); status != http.StatusOK || hdr.Get("X-Svc-User-Id") != "reporting" {
				t.Errorf("%s: %d %s, user %q; want 200 as reporting", name, status, rc, hdr.Get("X-Svc-User-Id"))
			}
		}
		wrong := testkit.WrongSecret(viewer)
		if status, rc, _ := httpCheck(t, s, "/orders/1", map[string]string{"X-Api-Key": wrong}); status != http.StatusUnauthorized || rc != "api-key-unknown" {
			t.Errorf("wrong secret: %d %s, want 401 api-key-unknown", status, rc)
		}
	})
	t.Run("authorize api", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, s.URL("/v1/authorize"), strings.NewReader(`{"action":"orders:read"}`))
		req.Header.Set("X-Api-Key", viewer)
		status, _, body := harness.Do(t, req)
		var d struct {
			Allowed bool   `json:"allowed"`
			Reason  string `json:"reason"`
		}
		if err := json.Unmarshal(body, &d); status != http.StatusOK || err != nil || !d.Allowed {
			t.Errorf("POST /v1/authorize with X-Api-Key: %d %s", status, body)
		}
	})

	id := strings.SplitN(strings.TrimPrefix(admin, "svck_"), "_", 2)[0]
	coreAPIKey(t, "revoke", "--file", file, id)
	testkit.Eventually(t, "the sidecar refusing the revoked key", func() bool {
		status, rc, _ := httpCheck(t, s, "/orders/1", map[string]string{"X-Api-Key": admin})
		return status == http.StatusUnauthorized && rc == "api-key-revoked"
	})
	if r := envoyCheckHeaders(t, s, "GET", "/orders/1", map[string]string{"x-api-key": admin}, nil); r.status != http.StatusUnauthorized || denyReason(r.body) != "api-key-revoked" {
		t.Errorf("revoked key on Check: %d %s", r.status, r.body)
	}

	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, file, append(data, []byte("\n[[keys]]\nid = \"aaaaaaaaaaaa\"\nkey = \""+viewer+"\"\n")...))
	testkit.Eventually(t, "the refusal of the file holding a plaintext key in /v1/status", func() bool {
		st := getStatus(t, s)
		return st.APIKeys != nil && st.APIKeys.Refusals == 1
	})
	full := getStatus(t, s)
	st := full.APIKeys
	if !strings.Contains(st.LastError, "plaintext") || strings.Contains(st.LastError, viewer) || st.Keys != 2 {
		t.Errorf("status api_keys = %+v, want the refusal (without the key) and 2 keys in force", st)
	}
	if full.Status != "degraded" || full.Reason != "api-keys-file-refused" {
		t.Errorf("status %q reason %q while the key file is refused, want degraded api-keys-file-refused", full.Status, full.Reason)
	}
	if status, rc, _ := httpCheck(t, s, "/orders/1", map[string]string{"X-Api-Key": viewer}); status != http.StatusOK {
		t.Errorf("viewer key after the refused file: %d %s, want 200", status, rc)
	}
	if status, rc, _ := httpCheck(t, s, "/orders/1", map[string]string{"X-Api-Key": admin}); rc != "api-key-revoked" {
		t.Errorf("revoked key after the refused file: %d %s, want still revoked", status, rc)
	}
	// Fixed, the file is accepted and the status healthy again.
	testkit.WriteFile(t, file, data)
	testkit.Eventually(t, "a healthy status once the key file is fixed", func() bool {
		st := getStatus(t, s)
		return st.Status == "healthy" && st.APIKeys.LastError == ""
	})
	// No key reaches the logs or the audit records.
	for name, recs := range map[string][]map[string]any{"log": s.LogRecords(t), "audit": s.AuditRecords(t)} {
		b, _ := json.Marshal(recs)
		for _, key := range []string{admin, viewer} {
			if secret := key[len("svck_")+13:]; strings.Contains(string(b), secret) {
				t.Errorf("an API key's secret is in the %s records", name)
			}
		}
		if len(recs) == 0 {
			t.Errorf("no %s records to look at", name)
		}
	}
}

// A key file that does not parse refuses the start, naming the line.
func TestAPIKeysBadFileRefusesStart(t *testing.T) {
	file := filepath.Join(t.TempDir(), "api-keys.toml")
	testkit.WriteFile(t, file, []byte("[[keys]]\nid = \"aeaqcaibaeaq\"\nkey = \"secret\"\n"))
	last := failedStart(t, map[string]string{"SVC_API_KEYS_FILE": file})
	wantRefusal(t, last, "api_keys.file", "line 3", "plaintext")
}
