package sidecar

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/bundletest"
	"github.com/svc-dev/svc/policies"
	"github.com/svc-dev/svc/reason"
)

// opaBuildBundle is a bundle of the default policy as `opa build
// --signing-key` makes it: signed, with a revision but no created_at in
// its manifest metadata.
func opaBuildBundle(t testing.TB, revision string, signKey []byte) []byte {
	t.Helper()
	src, err := policies.Default.ReadFile("authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	return bundletest.OPABuild(t, revision, src, signKey)
}

// TestBundlePollRefusesUnordered: a polled bundle whose signed manifest
// records no created_at cannot be ordered against the active one, so a
// replay of any older signed bundle would pass: the poller refuses it
// with bundle-unordered and the active bundle stays. An upload, which an
// operator orders by hand, still may.
func TestBundlePollRefusesUnordered(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	good := buildBundleAt(t, dir, "cp-1", signKey, time.Now().Add(-time.Minute))
	unordered := opaBuildBundle(t, "opa-2", signKey)

	serve := make(chan []byte, 1)
	serve <- good
	var current []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		select {
		case current = <-serve:
		default:
		}
		_, _ = w.Write(current)
	}))
	t.Cleanup(srv.Close)
	cfg := signedConfig(t, idp, verifyKey)
	cfg.Policy.BundleURL = srv.URL + "/svc.tar.gz"
	cfg.Policy.BundleMinPoll = config.Duration{Duration: 20 * time.Millisecond}
	cfg.Policy.BundleMaxPoll = config.Duration{Duration: 20 * time.Millisecond}
	r := startSidecar(t, cfg)
	testkit.Eventually(t, "cp-1 active", func() bool { return getStatus(t, r).PolicyRevision == "cp-1" })

	serve <- unordered
	var st Status
	testkit.Eventually(t, "the unordered bundle refused", func() bool {
		st = getStatus(t, r)
		return st.Bundle != nil && st.Bundle.LastErrorCode != "" || st.PolicyRevision != "cp-1"
	})
	if st.PolicyRevision != "cp-1" || st.Bundle.LastErrorCode != string(reason.BundleUnordered) || st.Bundle.Partitioned {
		t.Errorf("after an unordered bundle: revision %q, bundle %+v; want cp-1 kept, %s", st.PolicyRevision, *st.Bundle, reason.BundleUnordered)
	}

	if code, body := post(t, r, PathReloadPolicy, unordered); code != http.StatusOK {
		t.Errorf("upload of the unordered bundle = %d %s, want it accepted", code, body)
	}
}

// TestBundleMaxAge: with policy.bundle_max_age, an active bundle created
// longer ago turns the status degraded (policy-bundle-stale), still
// serving; a fresh bundle brings it back; without the setting an old
// bundle is healthy.
func TestBundleMaxAge(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	old := time.Now().Add(-2 * time.Hour).Truncate(time.Second)

	cfg := signedConfig(t, idp, verifyKey)
	cfg.Policy.BundleMaxAge = config.Duration{Duration: time.Hour}
	r := startSidecar(t, cfg)
	if st := getStatus(t, r); st.Status != StatusHealthy || st.PolicyCreatedAt != nil {
		t.Fatalf("the configured policy, no bundle: status %q %q, created %v; want healthy", st.Status, st.Reason, st.PolicyCreatedAt)
	}
	if code, body := post(t, r, PathReloadPolicy, buildBundleAt(t, dir, "old", signKey, old)); code != http.StatusOK {
		t.Fatalf("upload = %d %s", code, body)
	}
	st := getStatus(t, r)
	if st.Status != StatusDegraded || st.Reason != string(reason.PolicyBundleStale) || st.PolicyCreatedAt == nil || !st.PolicyCreatedAt.Equal(old) || !st.Ready {
		t.Errorf("a bundle 2h old, max age 1h: status %q %q, created %v, ready %v; want degraded %s, ready", st.Status, st.Reason, st.PolicyCreatedAt, st.Ready, reason.PolicyBundleStale)
	}
	if code, body := post(t, r, PathReloadPolicy, buildBundleAt(t, dir, "fresh", signKey, time.Now())); code != http.StatusOK {
		t.Fatalf("upload = %d %s", code, body)
	}
	if st := getStatus(t, r); st.Status != StatusHealthy || st.Reason != "" {
		t.Errorf("a fresh bundle: status %q %q, want healthy", st.Status, st.Reason)
	}

	cfg = signedConfig(t, idp, verifyKey)
	r = startSidecar(t, cfg)
	if code, body := post(t, r, PathReloadPolicy, buildBundleAt(t, dir, "old", signKey, old)); code != http.StatusOK {
		t.Fatalf("upload = %d %s", code, body)
	}
	if st := getStatus(t, r); st.Status != StatusHealthy {
		t.Errorf("no bundle_max_age, a bundle 2h old: status %q %q, want healthy", st.Status, st.Reason)
	}
}
