package sidecar

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// TestStatusAgreesWithReadiness starts a sidecar whose identity provider
// is down from the start: /readyz answers 503 jwks-unavailable, and
// /v1/status says the same instead of "healthy".
func TestStatusAgreesWithReadiness(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	idp.Close()
	r := startServer(t, Deps{Engine: newTestEngine(t, cfg)})
	testkit.Eventually(t, "serving", r.ready.Load)

	code, body := get(t, r, PathReadyz)
	var rz struct {
		Ready  bool   `json:"ready"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &rz); err != nil || code != http.StatusServiceUnavailable || rz.Ready || rz.Reason != "jwks-unavailable" {
		t.Fatalf("GET /readyz = %d %s, want 503 jwks-unavailable", code, body)
	}
	st := getStatus(t, r)
	if st.Status != StatusUnavailable || st.Ready || st.Reason != "jwks-unavailable" {
		t.Errorf("status=%q ready=%v reason=%q; want unavailable, not ready, jwks-unavailable", st.Status, st.Ready, st.Reason)
	}

	// Draining wins over everything, with the same reason as /readyz.
	r.draining.Store(true)
	defer r.draining.Store(false)
	if st := getStatus(t, r); st.Status != StatusDraining || st.Ready || st.Reason != "draining" {
		t.Errorf("while draining: status=%q ready=%v reason=%q", st.Status, st.Ready, st.Reason)
	}
}

// TestReloadFailuresAreLogged checks that a reload that fails is logged
// as a warning naming the file and line of the error, and that a body
// that is no bundle at all is reported as such.
func TestReloadFailuresAreLogged(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	cfg.Policy.Dir = t.TempDir()
	writePolicy(t, cfg.Policy.Dir, false)
	var logs testkit.SyncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r := startServer(t, Deps{Engine: newTestEngine(t, cfg), Logger: logger})
	testkit.Eventually(t, "ready", r.isReady)

	if err := os.WriteFile(filepath.Join(cfg.Policy.Dir, "authz.rego"), []byte("package svc.authz\n\nallow if {"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body := post(t, r, PathReloadPolicy, nil)
	if code != http.StatusUnprocessableEntity || errorCode(body) != "policy-error" {
		t.Fatalf("reload of a broken policy = %d %s, want 422 policy-error", code, body)
	}
	file := filepath.ToSlash(filepath.Join(cfg.Policy.Dir, "authz.rego")) + ":3"
	if got := logs.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, file) || !strings.Contains(got, "policy.dir") {
		t.Errorf("the failed reload was not logged as a warning naming %s and policy.dir:\n%s", file, got)
	}

	code, body = post(t, r, PathReloadPolicy, []byte("garbage"))
	if code != http.StatusBadRequest || errorCode(body) != "bundle-malformed" || !strings.Contains(string(body), "not a gzip") {
		t.Errorf("reload of garbage = %d %s, want 400 bundle-malformed", code, body)
	}
}
