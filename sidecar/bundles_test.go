package sidecar

import (
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/bundletest"
	"github.com/svc-dev/svc/reason"
)

// buildBundleAt bundles dir signed with signKey, recording created as its
// creation time.
func buildBundleAt(t testing.TB, dir, revision string, signKey []byte, created time.Time) []byte {
	t.Helper()
	return bundletest.Build(t, dir, bundle.BuildOptions{Revision: revision, SignKeyPEM: signKey, CreatedAt: created})
}

// verifyingConfig is testConfig with verifyKey, written to a file, as
// policy.bundle_verify_key_file.
func verifyingConfig(t testing.TB, idp *testIdP, verifyKey []byte) config.Config {
	t.Helper()
	cfg := testConfig(idp)
	cfg.Policy.BundleVerifyKeyFile = filepath.Join(t.TempDir(), "bundle.pub.pem")
	testkit.WriteFile(t, cfg.Policy.BundleVerifyKeyFile, verifyKey)
	return cfg
}

// signedSetup is where a signed-bundle test starts: a test IdP, a
// signing key pair and a policy directory with the restricted policy.
func signedSetup(t testing.TB) (idp *testIdP, signKey, verifyKey []byte, dir string) {
	t.Helper()
	idp = newTestIdP(t)
	signKey, verifyKey = testkit.ECKeyPEM(t)
	dir = t.TempDir()
	writePolicy(t, dir, true)
	return idp, signKey, verifyKey, dir
}

// signedConfig is testConfig with a verification key, a bundle cache
// directory and a state directory of its own.
func signedConfig(t testing.TB, idp *testIdP, verifyKey []byte) config.Config {
	cfg := verifyingConfig(t, idp, verifyKey)
	cfg.Policy.BundleCacheDir = filepath.Join(t.TempDir(), "bundles")
	cfg.Sidecar.StateDir = filepath.Join(t.TempDir(), "state")
	return cfg
}

// TestBundleRevisionNotBackwards: an older bundle (by its signed creation
// time) is refused unless the caller asks for it.
func TestBundleRevisionNotBackwards(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	r := startSidecar(t, signedConfig(t, idp, verifyKey))
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	steps := []struct {
		name     string
		body     []byte
		query    string
		wantCode int
		wantErr  string
		wantRev  string
	}{
		{"first bundle", buildBundleAt(t, dir, "v2", signKey, t0), "", http.StatusOK, "", "v2"},
		{"newer bundle", buildBundleAt(t, dir, "v3", signKey, t0.Add(time.Hour)), "", http.StatusOK, "", "v3"},
		{"older bundle", buildBundleAt(t, dir, "v2", signKey, t0), "", http.StatusConflict, string(reason.RevisionOlder), "v3"},
		{"same bundle again", buildBundleAt(t, dir, "v3", signKey, t0.Add(time.Hour)), "", http.StatusOK, "", "v3"},
		{"older bundle asked for", buildBundleAt(t, dir, "v2", signKey, t0), "?allow_downgrade=true", http.StatusOK, "", "v2"},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			code, body := post(t, r, PathReloadPolicy+step.query, step.body)
			if code != step.wantCode || errorCode(body) != step.wantErr {
				t.Fatalf("POST = %d %s, want %d %q", code, body, step.wantCode, step.wantErr)
			}
			if st := getStatus(t, r); st.PolicyRevision != step.wantRev {
				t.Errorf("policy_revision = %q, want %q", st.PolicyRevision, step.wantRev)
			}
		})
	}
}

func TestOlderBundle(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name         string
		next, active bundle.Info
		want         bool
	}{
		{"earlier creation", bundle.Info{Revision: "b", CreatedAt: t0}, bundle.Info{Revision: "a", CreatedAt: t0.Add(time.Second)}, true},
		{"later creation", bundle.Info{Revision: "a", CreatedAt: t0.Add(time.Second)}, bundle.Info{Revision: "b", CreatedAt: t0}, false},
		{"same creation", bundle.Info{Revision: "a", CreatedAt: t0}, bundle.Info{Revision: "b", CreatedAt: t0}, false},
		{"numeric revisions", bundle.Info{Revision: "9"}, bundle.Info{Revision: "10"}, true},
		{"numeric revisions forward", bundle.Info{Revision: "11"}, bundle.Info{Revision: "10"}, false},
		{"unordered revisions", bundle.Info{Revision: "abc"}, bundle.Info{Revision: "def"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := olderBundle(tc.next, tc.active); got != tc.want {
				t.Errorf("olderBundle = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBundlePersistedAcrossRestart: a restarted sidecar serves the bundle
// that was active, not the configured policy it started from.
func TestBundlePersistedAcrossRestart(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	cfg := signedConfig(t, idp, verifyKey)
	viewer := idp.token(t, "alice", testTenant, "viewer")

	first := startSidecar(t, cfg)
	code, body := post(t, first, PathReloadPolicy, buildBundle(t, dir, "rev-persisted", signKey))
	if code != http.StatusOK {
		t.Fatalf("upload: %d %s", code, body)
	}
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}

	second := startSidecar(t, cfg)
	st := getStatus(t, second)
	if st.PolicyRevision != "rev-persisted" || st.PolicySource != sourceCache {
		t.Errorf("after restart: policy_revision=%q source=%q, want rev-persisted from %s", st.PolicyRevision, st.PolicySource, sourceCache)
	}
	if allowed(t, dial(t, second.GRPCAddr()), viewer, "/orders/42") {
		t.Error("after restart the configured policy decides, not the persisted bundle")
	}

	// A persisted bundle that no longer verifies (the key was rotated)
	// is not served: the configured policy is.
	_, rotated := testkit.ECKeyPEM(t)
	testkit.WriteFile(t, cfg.Policy.BundleVerifyKeyFile, rotated)
	third := startSidecar(t, cfg)
	if st := getStatus(t, third); st.PolicyRevision == "rev-persisted" || st.PolicySource != sourceConfig {
		t.Errorf("with a rotated key: policy_revision=%q source=%q, want the configured policy", st.PolicyRevision, st.PolicySource)
	}
}

// countingGC is a bundle.GC that counts its holds.
type countingGC struct {
	mu              sync.Mutex
	held            []int
	active, release int
}

func (g *countingGC) Hold(percent int) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = append(g.held, percent)
	g.active++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.active--
		g.release++
	}
}

// TestBundleLoadHoldsGC: activating a bundle, and a refused one, hold the
// collector's target through Deps.GC and release it.
func TestBundleLoadHoldsGC(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	gc := &countingGC{}
	r := startServer(t, Deps{Engine: newTestEngine(t, signedConfig(t, idp, verifyKey)), GC: gc})
	testkit.Eventually(t, "GET /readyz answers 200", func() bool {
		status, _ := get(t, r, PathReadyz)
		return status == http.StatusOK
	})
	gc.mu.Lock()
	before := len(gc.held)
	gc.mu.Unlock()

	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if code, body := post(t, r, PathReloadPolicy, buildBundleAt(t, dir, "v2", signKey, t0)); code != http.StatusOK {
		t.Fatalf("POST bundle = %d %s", code, body)
	}
	_, otherKey, _, _ := signedSetup(t)
	if code, body := post(t, r, PathReloadPolicy, buildBundleAt(t, dir, "v3", otherKey, t0.Add(time.Hour))); code != http.StatusUnprocessableEntity {
		t.Fatalf("POST bundle of another key = %d %s, want 422", code, body)
	}
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if got := gc.held[before:]; len(got) != 2 || got[0] != 25 || got[1] != 25 {
		t.Errorf("holds during two activations: %v, want [25 25]", got)
	}
	if gc.active != 0 {
		t.Errorf("%d holds not released", gc.active)
	}
}
