package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/wire"
)

func controlPlane(t *testing.T, s *harness.Sidecar) wire.Status {
	t.Helper()
	st := getStatus(t, s)
	if st.Bundle == nil {
		t.Fatalf("status without the bundle poller: %+v", st)
	}
	return st
}

// TestBundleFromControlPlane serves signed bundles from Debian's nginx
// (its own ETags and 304s) to a sidecar that polls it; then takes nginx
// down and brings it back, serves a bundle with a bad signature, and
// restarts the sidecar during an outage. At each step the status fields
// say what a user relies on, and decisions keep being made.
func TestBundleFromControlPlane(t *testing.T) {
	k := newKeyring(t)
	keys := t.TempDir()
	signKey, verifyKey := ecKeyPair(t, keys)
	otherKey, _ := ecKeyPair(t, t.TempDir())
	served := t.TempDir()
	addr := harness.FreeAddr(t)
	token := harness.WriteFile(t, keys, "cp-token", "cp-token-5e1f\n")
	policies := filepath.Join(harness.ModuleRoot(t), "policies")

	// publish builds a bundle and moves it into nginx's root at once.
	// nginx's ETag is the file's modification time in seconds and its
	// size, and bundles differing only in a revision of the same length
	// have the same size: each gets a modification time of its own, or
	// two published within a second would share an ETag.
	var modified time.Time
	publish := func(revision, key string) {
		t.Helper()
		tmp := filepath.Join(keys, revision+".tar.gz")
		cmd := []string{"policy", "bundle", "--dir", policies, "--sign-key", key, "--revision", revision, "--out", tmp}
		if code, _, stderr := runCore(t, cmd...); code != 0 {
			t.Fatalf("core policy bundle: %s", stderr)
		}
		if now := time.Now().Truncate(time.Second); now.After(modified) {
			modified = now
		} else {
			modified = modified.Add(time.Second)
		}
		if err := os.Chtimes(tmp, modified, modified); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(served, "svc.tar.gz")); err != nil {
			t.Fatal(err)
		}
	}
	publish("cp-1", signKey)
	nginx := harness.StartNginxStatic(t, served, addr)

	s := harness.StartSidecar(t, harness.SidecarOptions{
		Config: sidecarConfig + `
[policy]
bundle_min_poll = "150ms"
bundle_max_poll = "300ms"
`,
		Env: map[string]string{
			"SVC_JWKS_URL":               k.jwks.URL,
			"SVC_BUNDLE_URL":             "http://" + addr + "/svc.tar.gz",
			"SVC_BUNDLE_VERIFY_KEY_FILE": verifyKey,
			"SVC_BUNDLE_TOKEN_FILE":      token,
			"SVC_BUNDLE_CACHE_DIR":       filepath.Join(keys, "cache"),
			"SVC_LOG_LEVEL":              "info",
		},
	})
	viewer := k.token(t, "alice", "acme", "viewer")
	decides := func(step string) {
		t.Helper()
		if r := envoyCheck(t, s, "GET", "/orders/1", viewer, nil); r.status != http.StatusOK {
			t.Errorf("%s: a viewer's read was answered %d %s", step, r.status, r.body)
		}
	}
	var st wire.Status
	await := func(what string, cond func(wire.Status) bool) {
		t.Helper()
		testkit.Eventually(t, what, func() bool { st = controlPlane(t, s); return cond(st) })
	}
	// partition checks the fields a user reads at each step, together:
	// in sync (healthy, not partitioned, no since-time) or partitioned
	// (degraded, since a time no earlier than the last sync), a valid
	// cache with an age either way, and core sidecar status agreeing
	// (exit 0 healthy, 1 degraded).
	partition := func(step string, want bool) {
		t.Helper()
		status, since := "healthy", "false"
		if want {
			status, since = "degraded", "true, since "
		}
		if st.Status != status || st.Partitioned != want || st.Bundle.Partitioned != want ||
			(st.PartitionedSince != nil) != want || st.LastSync == nil || !st.CacheValid {
			t.Errorf("%s: status %q, partitioned %v (bundle %v) since %v, last_sync %v, cache_valid %v; want %s",
				step, st.Status, st.Partitioned, st.Bundle.Partitioned, st.PartitionedSince, st.LastSync, st.CacheValid, status)
		}
		if want && st.PartitionedSince != nil && st.LastSync != nil && st.LastSync.After(*st.PartitionedSince) {
			t.Errorf("%s: last_sync %v after partitioned_since %v", step, st.LastSync, st.PartitionedSince)
		}
		if _, err := time.ParseDuration(st.CacheAge); err != nil {
			t.Errorf("%s: cache_age %q: %v", step, st.CacheAge, err)
		}
		code, stdout, stderr := runCoreAt(t, s, "sidecar", "status")
		if wantCode := map[bool]int{false: 0, true: 1}[want]; code != wantCode ||
			!regexp.MustCompile(`(?m)^Partitioned:\s+`+since).MatchString(stdout) {
			t.Errorf("%s: core sidecar status exit %d, want %d with Partitioned: %s\n%s%s", step, code, wantCode, since, stdout, stderr)
		}
	}

	// 1. The first bundle arrives; later polls are answered 304.
	await("revision cp-1", func(st wire.Status) bool { return st.PolicyRevision == "cp-1" })
	if st.PolicySource != "bundle_url" || st.Bundle.ETag == "" {
		t.Errorf("after the first sync: %+v %+v", st, *st.Bundle)
	}
	partition("first sync", false)
	etag := st.Bundle.ETag
	access := filepath.Join(nginx.Dir, "access.log")
	testkit.Eventually(t, "a 304 for the ETag, with the bearer token", func() bool {
		b, _ := os.ReadFile(access)
		return strings.Contains(string(b), `304 "`+etag+`" "Bearer cp-token-5e1f"`)
	})
	decides("cp-1")

	// 2. A new bundle on the server replaces it.
	publish("cp-2", signKey)
	await("revision cp-2", func(st wire.Status) bool { return st.PolicyRevision == "cp-2" })
	if st.Bundle.ETag == etag {
		t.Errorf("the ETag did not change with the bundle: %q", etag)
	}
	partition("new bundle", false)

	// 3. Outage: partitioned since a time, still serving cp-2 from memory.
	synced := *st.Bundle.LastSync
	nginx.Stop(t)
	await("partitioned", func(st wire.Status) bool { return st.Partitioned })
	if st.PolicyRevision != "cp-2" {
		t.Errorf("during the outage: revision %q, want cp-2", st.PolicyRevision)
	}
	partition("outage", true)
	since := *st.PartitionedSince
	// The cache ages through the outage; the partition keeps its start.
	testkit.Eventually(t, "a cache age of 1s", func() bool {
		st = controlPlane(t, s)
		age, err := time.ParseDuration(st.CacheAge)
		return err == nil && age >= time.Second
	})
	if !st.Partitioned || !st.PartitionedSince.Equal(since) {
		t.Errorf("1 s into the outage: cache_age %q, partitioned %v since %v (was %v)", st.CacheAge, st.Partitioned, st.PartitionedSince, since)
	}
	decides("outage")

	// 4. Recovery: healthy again, synced after the outage began.
	nginx = harness.StartNginxStatic(t, served, addr)
	await("healthy again", func(st wire.Status) bool { return !st.Partitioned && st.Status == "healthy" })
	if st.Bundle.LastSync == nil || !st.Bundle.LastSync.After(synced) || st.PolicyRevision != "cp-2" {
		t.Errorf("after recovery: %+v %+v", st, *st.Bundle)
	}
	partition("recovery", false)

	// 5. A bundle with a bad signature is refused; cp-2 stays.
	publish("cp-3", otherKey)
	await("the refusal", func(st wire.Status) bool { return strings.Contains(st.Bundle.LastError, "signature") })
	if st.Bundle.LastErrorCode != "bundle-signature-invalid" {
		t.Errorf("bad signature: last_error_code %q, want bundle-signature-invalid (%s)", st.Bundle.LastErrorCode, st.Bundle.LastError)
	}
	if st.PolicyRevision != "cp-2" {
		t.Errorf("after a badly signed bundle: revision %q, want cp-2", st.PolicyRevision)
	}
	partition("bad signature (the server answered)", false)
	decides("bad signature")

	// 6. A restart during an outage serves the persisted bundle.
	publish("cp-2b", signKey)
	await("revision cp-2b", func(st wire.Status) bool { return st.PolicyRevision == "cp-2b" })
	nginx.Stop(t)
	// It comes back ready, and degraded (exit 1) once its first poll
	// failed, which may come just after the restart reports.
	code, stdout, stderr := runCoreAt(t, s, "sidecar", "restart", "--drain-timeout", "5")
	if !(code == 1 && strings.HasPrefix(stdout, "degraded ")) && !(code == 0 && strings.HasPrefix(stdout, "healthy ")) {
		t.Fatalf("restart during an outage: exit %d %q %s", code, stdout, stderr)
	}
	await("partitioned after the restart", func(st wire.Status) bool { return st.Partitioned })
	if st.PolicyRevision != "cp-2b" || st.PolicySource != "cache" {
		t.Errorf("restarted during an outage: revision %q from %q; want the persisted cp-2b", st.PolicyRevision, st.PolicySource)
	}
	partition("restarted during the outage", true)
	decides("restarted during the outage")
}
