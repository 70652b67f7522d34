package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/bundletest"
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

// TestBundleMaxBytes builds, with core policy bundle, a signed bundle of
// 50 MB (its 68 MB of data split into files of at most 32 MiB) and
// uploads it with core sidecar reload-policy: a sidecar with the default
// policy.bundle_max_bytes (32 MiB) refuses it as bundle-too-large and
// keeps its policy; one with SVC_POLICY_BUNDLE_MAX_BYTES = 64 MiB
// activates it.
func TestBundleMaxBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and loads a 50 MB bundle")
	}
	t.Parallel()
	k := newKeyring(t)
	dir := t.TempDir()
	signKey, verifyKey := ecKeyPair(t, dir)
	policyDir := t.TempDir()
	harness.WriteFile(t, policyDir, "authz.rego", readPolicy(t))
	// Random bytes in base64 compress to 3/4 of their size: four strings
	// of 17 MB make a bundle of 50 MB.
	var data strings.Builder
	data.WriteString(`{"svc":{"blobs":{`)
	for i := range 4 {
		b := make([]byte, 12_750_000)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&data, `%s"b%d":{"v":"%s"}`, map[bool]string{true: ",", false: ""}[i > 0], i, base64.StdEncoding.EncodeToString(b))
	}
	data.WriteString(`}}}`)
	harness.WriteFile(t, policyDir, "data.json", data.String())
	data.Reset()
	out := filepath.Join(dir, "big.tar.gz")
	if code, _, stderr := runCore(t, "policy", "bundle", "--dir", policyDir, "--sign-key", signKey, "--revision", "rev-50mb", "--out", out); code != 0 {
		t.Fatalf("core policy bundle: exit %d: %s", code, stderr)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() < 50_000_000 || fi.Size() > 64<<20 {
		t.Fatalf("the bundle: %v, %v; want 50 MB", fi, err)
	}

	config := sidecarConfig + fmt.Sprintf("\n[policy]\nbundle_verify_key_file = %q\n", verifyKey)
	for _, tc := range []struct {
		name, maxBytes string
		wantExit       int
		wantOut        string
	}{
		{name: "default limit", wantExit: 1, wantOut: "bundle-too-large"},
		{name: "raised to 64 MiB", maxBytes: fmt.Sprint(64 << 20), wantOut: "rev-50mb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"SVC_JWKS_URL": k.jwks.URL}
			if tc.maxBytes != "" {
				env["SVC_POLICY_BUNDLE_MAX_BYTES"] = tc.maxBytes
			}
			s := harness.StartSidecar(t, harness.SidecarOptions{Config: config, Env: env})
			before := statusOf(t, s).PolicyRevision
			code, stdout, stderr := runCoreAt(t, s, "sidecar", "reload-policy", "--bundle", out)
			if code != tc.wantExit || !strings.Contains(stdout+stderr, tc.wantOut) {
				t.Fatalf("core sidecar reload-policy: exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tc.wantExit, tc.wantOut)
			}
			want := before
			if tc.wantExit == 0 {
				want = "rev-50mb"
			}
			if got := statusOf(t, s).PolicyRevision; got != want {
				t.Errorf("policy_revision = %q, want %q", got, want)
			}
		})
	}
}
