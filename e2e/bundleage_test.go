package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/bundletest"
	"github.com/svc-dev/svc/wire"
)

// TestBundleAgeAndReplay runs a sidecar polling a control plane with
// policy.bundle_max_age = 1h. A bundle created 2 h ago serves but turns
// the status degraded (policy-bundle-stale), which core sidecar status
// shows with the bundle's creation time; a replayed older signed bundle
// is refused (revision-older), and so is a signed bundle without
// created_at (bundle-unordered), which could not be told from a replay.
func TestBundleAgeAndReplay(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	b := newBundleSigner(t)
	build := func(revision string, created time.Time) []byte {
		t.Helper()
		return b.build(t, b.shipped, revision, created)
	}
	// opaBuild signs as opa build --signing-key does: no created_at.
	opaBuild := func(revision string) []byte {
		t.Helper()
		src, err := os.ReadFile(filepath.Join(b.shipped, "authz.rego"))
		if err != nil {
			t.Fatal(err)
		}
		return bundletest.OPABuild(t, revision, src, b.signPEM)
	}
	now := time.Now().UTC().Truncate(time.Second)
	cp := startReplayServer(t, build("cp-2h", now.Add(-2*time.Hour)))
	serve := cp.serve

	s := startPollingSidecar(t, k, cp.URL, b.verifyKeyFile, map[string]string{"SVC_BUNDLE_MAX_AGE": "1h"})
	var st wire.Status
	testkit.Eventually(t, "cp-2h active", func() bool { st = getStatus(t, s); return st.PolicyRevision == "cp-2h" })
	if st.Status != "degraded" || st.Reason != "policy-bundle-stale" || st.PolicyCreatedAt == nil || !st.PolicyCreatedAt.Equal(now.Add(-2*time.Hour)) {
		t.Errorf("a bundle 2h old with max age 1h: status %q (%s), created %v", st.Status, st.Reason, st.PolicyCreatedAt)
	}
	code, stdout, stderr := runCoreAt(t, s, "sidecar", "status")
	if code != 1 || !regexp.MustCompile(`(?m)^Status:\s+degraded \(policy-bundle-stale\)$`).MatchString(stdout) ||
		!strings.Contains(stdout, "created "+now.Add(-2*time.Hour).Format(time.RFC3339)) {
		t.Errorf("core sidecar status: exit %d\n%s%s", code, stdout, stderr)
	}

	// A replay of an older signed bundle: refused.
	serve(build("cp-3h", now.Add(-3*time.Hour)))
	testkit.Eventually(t, "the replay refused", func() bool { st = getStatus(t, s); return st.Bundle.LastErrorCode != "" })
	if st.Bundle.LastErrorCode != "revision-older" || st.PolicyRevision != "cp-2h" {
		t.Errorf("replayed older bundle: %q (%s), revision %q", st.Bundle.LastErrorCode, st.Bundle.LastError, st.PolicyRevision)
	}
	// A bundle that cannot be ordered: refused as well.
	serve(opaBuild("opa-1"))
	testkit.Eventually(t, "the unordered bundle refused", func() bool {
		st = getStatus(t, s)
		return st.Bundle.LastErrorCode == "bundle-unordered" || st.PolicyRevision != "cp-2h"
	})
	if st.PolicyRevision != "cp-2h" || !strings.Contains(st.Bundle.LastError, "created_at") {
		t.Errorf("unordered bundle: revision %q, %+v", st.PolicyRevision, *st.Bundle)
	}

	// A fresh bundle: healthy again.
	serve(build("cp-now", time.Now()))
	testkit.Eventually(t, "cp-now active", func() bool { st = getStatus(t, s); return st.PolicyRevision == "cp-now" })
	if st.Status != "healthy" || st.Reason != "" {
		t.Errorf("a fresh bundle: status %q (%s)", st.Status, st.Reason)
	}
}
