package sidecar

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// TestBundleRollbackAcrossRestart: a sidecar started afresh, without
// policy.bundle_cache_dir, refuses a signed bundle older than the last
// one accepted before (policy-bundle-rollback), by the record in
// sidecar.state_dir; the operator can still go back on purpose, and a
// deleted record forgets the order.
func TestBundleRollbackAcrossRestart(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	b1 := buildBundleAt(t, dir, "b1", signKey, t0)
	b2 := buildBundleAt(t, dir, "b2", signKey, t0.Add(time.Minute))
	cfg := signedConfig(t, idp, verifyKey)
	cfg.Policy.BundleCacheDir = ""

	first := startSidecar(t, cfg)
	if code, body := post(t, first, PathReloadPolicy, b2); code != http.StatusOK {
		t.Fatalf("upload b2: %d %s", code, body)
	}
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}

	second := startSidecar(t, cfg)
	st := getStatus(t, second)
	if st.PolicySource != sourceConfig || st.PolicyState == nil || st.PolicyState.Revision != "b2" ||
		st.PolicyState.CreatedAt == nil || !st.PolicyState.CreatedAt.Equal(t0.Add(time.Minute)) ||
		!strings.HasPrefix(st.PolicyState.File, cfg.Sidecar.StateDir+string(filepath.Separator)) {
		t.Fatalf("started afresh: source %q, policy_state %+v; want the configured policy and the record of b2", st.PolicySource, st.PolicyState)
	}
	code, body := post(t, second, PathReloadPolicy, b1)
	if code != http.StatusConflict || errorCode(body) != string(reason.PolicyBundleRollback) || !strings.Contains(string(body), `\"b2\"`) {
		t.Errorf("the older b1 after a restart = %d %s, want 409 %s naming b2", code, body, reason.PolicyBundleRollback)
	}
	if st := getStatus(t, second); st.PolicyRevision == "b1" || st.PolicySource != sourceConfig {
		t.Errorf("after the refusal: revision %q from %q, want the configured policy", st.PolicyRevision, st.PolicySource)
	}
	if code, body := post(t, second, PathReloadPolicy+"?allow_downgrade=true", b1); code != http.StatusOK {
		t.Fatalf("b1 asked for explicitly = %d %s, want 200", code, body)
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}

	// The downgrade asked for is the new order: b1 is accepted again
	// after a restart, and so is b2, newer.
	third := startSidecar(t, cfg)
	if st := getStatus(t, third); st.PolicyState == nil || st.PolicyState.Revision != "b1" {
		t.Fatalf("after the downgrade: policy_state %+v, want b1", st.PolicyState)
	}
	for _, b := range [][]byte{b1, b2} {
		if code, body := post(t, third, PathReloadPolicy, b); code != http.StatusOK {
			t.Errorf("upload after the downgrade = %d %s", code, body)
		}
	}
	if err := third.stop(t); err != nil {
		t.Fatal(err)
	}

	// Deleting the record resets the order.
	files, _ := filepath.Glob(filepath.Join(cfg.Sidecar.StateDir, bundleStatePrefix+"*"+bundleStateSuffix))
	if len(files) != 1 {
		t.Fatalf("state files %q, want one", files)
	}
	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	fourth := startSidecar(t, cfg)
	if code, body := post(t, fourth, PathReloadPolicy, b1); code != http.StatusOK {
		t.Errorf("b1 with the record deleted = %d %s, want 200", code, body)
	}
}

// TestBundleStateFile: the record holds what orders bundles and names
// the bundle, no key material, readable by its owner only; one written
// under another key does not apply; a corrupt one is reported and
// replaced by the next activation.
func TestBundleStateFile(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	created := time.Now().Add(-time.Minute).Truncate(time.Second)
	cfg := signedConfig(t, idp, verifyKey)
	cfg.Policy.BundleCacheDir = ""
	r := startSidecar(t, cfg)
	if code, body := post(t, r, PathReloadPolicy, buildBundleAt(t, dir, "rec-1", signKey, created)); code != http.StatusOK {
		t.Fatalf("upload: %d %s", code, body)
	}
	st := getStatus(t, r)
	if st.PolicyState == nil || st.PolicyState.File == "" || st.PolicyState.LastError != "" {
		t.Fatalf("policy_state %+v", st.PolicyState)
	}
	path := st.PolicyState.File
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("record mode %v, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("record %s: %v", data, err)
	}
	if rec["revision"] != "rec-1" || rec["created_at"] != created.UTC().Format(time.RFC3339) || rec["source"] != sourceUpload ||
		rec["key"] != keyFingerprint(verifyKey) || len(rec["digest"].(string)) != 64 {
		t.Errorf("record %s", data)
	}
	if strings.Contains(string(data), "BEGIN") || strings.Contains(string(data), "package") {
		t.Errorf("the record holds key or policy text: %s", data)
	}

	// Another key's sidecar sharing the directory keeps its own record.
	otherSign, otherVerify := testkit.ECKeyPEM(t)
	other := signedConfig(t, idp, otherVerify)
	other.Sidecar.StateDir = cfg.Sidecar.StateDir
	o := startSidecar(t, other)
	if code, body := post(t, o, PathReloadPolicy, buildBundleAt(t, dir, "other-0", otherSign, created.Add(-time.Hour))); code != http.StatusOK {
		t.Errorf("another key's older bundle = %d %s, want 200: the record is per key", code, body)
	}

	// A corrupt record: reported, taken as none, replaced.
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, path, []byte("{not json"))
	r = startSidecar(t, cfg)
	if st := getStatus(t, r); st.PolicyState == nil || st.PolicyState.LastError == "" {
		t.Errorf("a corrupt record: policy_state %+v, want last_error", st.PolicyState)
	}
	if code, body := post(t, r, PathReloadPolicy, buildBundleAt(t, dir, "rec-0", signKey, created.Add(-time.Hour))); code != http.StatusOK {
		t.Fatalf("upload over a corrupt record = %d %s", code, body)
	}
	if st := getStatus(t, r); st.PolicyState.Revision != "rec-0" || st.PolicyState.LastError != "" {
		t.Errorf("after the upload: policy_state %+v, want rec-0 recorded", st.PolicyState)
	}
}

// TestBundleStateWriteFailure: a record that cannot be written leaves the
// bundle active and says so in status; the next activation, of the same
// bundle too, writes it once it can.
func TestBundleStateWriteFailure(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	cfg := signedConfig(t, idp, verifyKey)
	// A file where the directory should be: nothing can be created in it.
	testkit.WriteFile(t, cfg.Sidecar.StateDir, nil)
	r := startSidecar(t, cfg)
	b := buildBundleAt(t, dir, "unrecorded", signKey, time.Now())
	if code, body := post(t, r, PathReloadPolicy, b); code != http.StatusOK {
		t.Fatalf("upload = %d %s, want 200 whatever the record", code, body)
	}
	st := getStatus(t, r)
	if st.PolicyRevision != "unrecorded" || st.PolicyState == nil || st.PolicyState.LastError == "" {
		t.Fatalf("a record that cannot be written: revision %q, policy_state %+v; want the bundle active and last_error", st.PolicyRevision, st.PolicyState)
	}
	if err := os.Remove(cfg.Sidecar.StateDir); err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, r, PathReloadPolicy, b); code != http.StatusOK {
		t.Fatalf("the same upload again = %d %s", code, body)
	}
	st = getStatus(t, r)
	if st.PolicyState.LastError != "" {
		t.Errorf("after the directory was fixed: policy_state %+v, want no last_error", st.PolicyState)
	}
	if _, err := os.Stat(st.PolicyState.File); err != nil {
		t.Errorf("the record was not written: %v", err)
	}
}

// TestBundleMaxAgeRefuse: with policy.bundle_max_age_action = "refuse",
// a bundle created longer ago than policy.bundle_max_age is refused
// (policy-bundle-stale), even asked for explicitly, and so is one whose
// age cannot be told; at start, a stale bundle in the cache is refused
// and the status says so; an active bundle that ages past the limit
// keeps serving, degraded.
func TestBundleMaxAgeRefuse(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	now := time.Now().Truncate(time.Second)
	stale := buildBundleAt(t, dir, "stale", signKey, now.Add(-2*time.Hour))

	cfg := signedConfig(t, idp, verifyKey)
	cfg.Policy.BundleMaxAge = config.Duration{Duration: time.Hour}
	cfg.Policy.BundleMaxAgeAction = config.BundleMaxAgeRefuse
	r := startSidecar(t, cfg)
	if code, body := post(t, r, PathReloadPolicy, buildBundleAt(t, dir, "fresh", signKey, now)); code != http.StatusOK {
		t.Fatalf("a fresh bundle = %d %s", code, body)
	}
	for _, q := range []string{"", "?allow_downgrade=true"} {
		code, body := post(t, r, PathReloadPolicy+q, stale)
		if code != http.StatusUnprocessableEntity || errorCode(body) != string(reason.PolicyBundleStale) || !strings.Contains(string(body), "policy.bundle_max_age") {
			t.Errorf("a bundle 2h old, max age 1h%s = %d %s, want 422 %s", q, code, body, reason.PolicyBundleStale)
		}
	}
	code, body := post(t, r, PathReloadPolicy, opaBuildBundle(t, "opa-1", signKey))
	if code != http.StatusUnprocessableEntity || errorCode(body) != string(reason.BundleUnordered) {
		t.Errorf("a bundle without created_at = %d %s, want 422 %s", code, body, reason.BundleUnordered)
	}
	if st := getStatus(t, r); st.PolicyRevision != "fresh" || st.Status != StatusHealthy {
		t.Errorf("after the refusals: revision %q, status %q %q; want fresh, healthy", st.PolicyRevision, st.Status, st.Reason)
	}

	// The cache holds a stale bundle accepted under "degrade": a sidecar
	// started under "refuse" does not serve it, and says why.
	degrade := cfg
	degrade.Policy.BundleMaxAgeAction = config.BundleMaxAgeDegrade
	degrade.Sidecar.StateDir = filepath.Join(t.TempDir(), "state")
	degrade.Policy.BundleCacheDir = filepath.Join(t.TempDir(), "bundles")
	d := startSidecar(t, degrade)
	if code, body := post(t, d, PathReloadPolicy, stale); code != http.StatusOK {
		t.Fatalf("under degrade, a stale bundle = %d %s, want 200", code, body)
	}
	if err := d.stop(t); err != nil {
		t.Fatal(err)
	}
	refuse := degrade
	refuse.Policy.BundleMaxAgeAction = config.BundleMaxAgeRefuse
	rr := startSidecar(t, refuse)
	st := getStatus(t, rr)
	if st.PolicyRevision == "stale" || st.PolicySource != sourceConfig || st.Status != StatusDegraded ||
		st.PolicyHandoverRefused == nil || st.PolicyHandoverRefused.Code != string(reason.PolicyBundleStale) {
		t.Errorf("a stale cached bundle under refuse: revision %q from %q, status %q %q, refused %+v; want the configured policy, degraded",
			st.PolicyRevision, st.PolicySource, st.Status, st.Reason, st.PolicyHandoverRefused)
	}

	// Accepted fresh, it ages past the limit while active: it keeps
	// serving, and the status turns degraded.
	short := cfg
	short.Policy.BundleMaxAge = config.Duration{Duration: 3 * time.Second}
	short.Sidecar.StateDir = filepath.Join(t.TempDir(), "state")
	s := startSidecar(t, short)
	if code, body := post(t, s, PathReloadPolicy, buildBundleAt(t, dir, "ageing", signKey, time.Now())); code != http.StatusOK {
		t.Fatalf("a fresh bundle = %d %s", code, body)
	}
	testkit.Eventually(t, "the active bundle stale", func() bool { return getStatus(t, s).Reason == string(reason.PolicyBundleStale) })
	if st := getStatus(t, s); st.PolicyRevision != "ageing" || st.Status != StatusDegraded || !st.Ready {
		t.Errorf("an active bundle past max age: revision %q, status %q, ready %v; want it serving, degraded", st.PolicyRevision, st.Status, st.Ready)
	}
}

func TestResolveStateDir(t *testing.T) {
	tests := []struct {
		name       string
		configured string
		env        map[string]string
		varLibSvc  bool
		want, from string
	}{
		{"configured wins", "/srv/state", map[string]string{"STATE_DIRECTORY": "/var/lib/svc", "XDG_STATE_HOME": "/home/u/.local/state"}, true, "/srv/state", "sidecar.state_dir"},
		{"systemd", "", map[string]string{"STATE_DIRECTORY": "/var/lib/svc:/var/lib/other", "XDG_STATE_HOME": "/home/u/.local/state"}, false, "/var/lib/svc", "$STATE_DIRECTORY"},
		{"XDG", "", map[string]string{"XDG_STATE_HOME": "/home/u/.local/state"}, true, "/home/u/.local/state/svc", "$XDG_STATE_HOME"},
		{"relative XDG is ignored", "", map[string]string{"XDG_STATE_HOME": "state"}, false, "", ""},
		{"package directory", "", nil, true, "/var/lib/svc", "/var/lib/svc"},
		{"none", "", nil, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, from := resolveStateDir(tt.configured, func(k string) string { return tt.env[k] }, func(string) bool { return tt.varLibSvc })
			if dir != tt.want || from != tt.from {
				t.Errorf("resolveStateDir = %q, %q; want %q, %q", dir, from, tt.want, tt.from)
			}
		})
	}
}
