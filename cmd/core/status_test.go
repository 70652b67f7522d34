package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
)

// TestSidecarStatusNotReady runs a sidecar whose identity provider never
// answered: `core sidecar status` says unavailable with the reason, as
// /readyz does, instead of healthy, and exits 1 so that
// `core sidecar status && ...` stops there; in JSON too.
func TestSidecarStatusNotReady(t *testing.T) {
	cfg := devConfig()
	cfg.SDK.FailMode = config.FailClosed
	cfg.SDK.JWKSURL = closedURL(t) + "/jwks.json"
	url := startSidecarWith(t, cfg)

	// Until Serve has begun the reason is "starting".
	want := regexp.MustCompile(`(?m)^Status:\s+unavailable \(jwks-unavailable\)$`)
	r := waitStatus(t, url, func(r result) bool { return want.MatchString(r.stdout) })
	if r.code != exitFailed {
		t.Errorf("exit %d for an unavailable sidecar, want 1\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "sidecar at "+url+" is unavailable (jwks-unavailable)") {
		t.Errorf("stderr does not say why: %q", r.stderr)
	}

	r = run(t, "", "--sidecar", url, "--output", "json", "sidecar", "status")
	checkOneJSON(t, r.stdout)
	var doc struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if r.code != exitFailed || doc.Status != "unavailable" || doc.Reason != "jwks-unavailable" {
		t.Errorf("--output json: exit %d, status %q (%q); want 1, unavailable (jwks-unavailable)\n%s", r.code, doc.Status, doc.Reason, r.stdout)
	}
}

// TestSidecarStatusDegraded: a sidecar that is ready but cannot reach its
// bundle server is degraded; status exits 1 although /readyz would
// admit traffic, because it is not in sync.
func TestSidecarStatusDegraded(t *testing.T) {
	tmp := workspace(t)
	cfg := devConfig()
	cfg.Policy.BundleVerifyKeyFile = filepath.Join(tmp, "ec.pub")
	cfg.Policy.BundleURL = closedURL(t) + "/bundle.tar.gz"
	url := startSidecarWith(t, cfg)

	want := regexp.MustCompile(`(?m)^Status:\s+degraded \(bundle-server-unreachable\)$`)
	r := waitStatus(t, url, func(r result) bool { return want.MatchString(r.stdout) })
	if r.code != exitFailed || !strings.Contains(r.stderr, "is degraded (bundle-server-unreachable)") {
		t.Errorf("exit %d, stderr %q; want 1 saying degraded\n%s", r.code, r.stderr, r.stdout)
	}
	if !regexp.MustCompile(`(?m)^Partitioned:\s+true, since `).MatchString(r.stdout) {
		t.Errorf("the report is not printed whole:\n%s", r.stdout)
	}
}

// TestSidecarStatusRedisEvicts: a sidecar whose Redis may evict keys
// when full is degraded, and the report says what to set.
func TestSidecarStatusRedisEvicts(t *testing.T) {
	cfg := devConfig()
	cfg.RateLimit.RedisAddr = redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: cfg.RateLimit.RedisAddr})
	defer c.Close()
	for k, v := range map[string]string{"maxmemory": "64mb", "maxmemory-policy": "allkeys-lru"} {
		if err := c.ConfigSet(context.Background(), k, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	url := startSidecarWith(t, cfg)

	want := regexp.MustCompile(`(?m)^Status:\s+degraded \(redis-evicts-keys\)$`)
	r := waitStatus(t, url, func(r result) bool { return want.MatchString(r.stdout) })
	if r.code != exitFailed {
		t.Errorf("exit %d for a degraded sidecar, want 1", r.code)
	}
	if !regexp.MustCompile(`(?m)^Redis:\s+127\.0\.0\.1:\d+, maxmemory-policy allkeys-lru, maxmemory 67108864 bytes: evicts keys when full$`).MatchString(r.stdout) {
		t.Errorf("the report has no Redis line:\n%s", r.stdout)
	}
	if !regexp.MustCompile(`(?m)^Warning:\s+Redis at \S+ may evict keys when full \(maxmemory-policy allkeys-lru, maxmemory 67108864 bytes\).*set maxmemory-policy noeviction$`).MatchString(r.stdout) {
		t.Errorf("the report does not warn of the eviction policy:\n%s", r.stdout)
	}
}

// TestSidecarStatusHelpExitCodes: the exit codes scripts rely on are in
// the command's help.
func TestSidecarStatusHelpExitCodes(t *testing.T) {
	r := run(t, "", "sidecar", "status", "--help")
	help := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"0 the sidecar is healthy", "1 it answers but is degraded, unavailable or draining", "3 it cannot be reached"} {
		if !strings.Contains(help, want) {
			t.Errorf("core sidecar status --help does not say %q:\n%s", want, r.stdout)
		}
	}
}

// waitStatus runs `core sidecar status` until done accepts its result
// (generous deadline: the sidecar starts on a loaded machine).
func waitStatus(t *testing.T, url string, done func(result) bool) result {
	t.Helper()
	var r result
	testkit.Poll(t, 30*time.Second, "the expected status", func() (bool, string) {
		r = run(t, "", "--sidecar", url, "sidecar", "status")
		if r.code == exitUnreachable || r.code == exitUsage {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return done(r), "\n" + r.stdout + r.stderr
	})
	return r
}

// TestReloadPolicyNotPersisted: an upload to a sidecar without
// policy.bundle_cache_dir is kept by restarts but not by a new process,
// and reload-policy says so; with the cache directory it says nothing more.
func TestReloadPolicyNotPersisted(t *testing.T) {
	tmp := workspace(t)
	const note = "the bundle is not persisted (policy.bundle_cache_dir is not set)"
	for _, cacheDir := range []string{"", t.TempDir()} {
		cfg := devConfig()
		cfg.Policy.BundleVerifyKeyFile = filepath.Join(tmp, "ec.pub")
		cfg.Policy.BundleCacheDir = cacheDir
		url := startSidecarWith(t, cfg)
		r := run(t, tmp, "--sidecar", url, "sidecar", "reload-policy", "--bundle", "$TMP/signed.tar.gz")
		if r.code != 0 || !strings.Contains(r.stdout, "policy revision r1 active") {
			t.Fatalf("cache dir %q: exit %d\n%s%s", cacheDir, r.code, r.stdout, r.stderr)
		}
		if got := strings.Contains(r.stderr, note); got != (cacheDir == "") {
			t.Errorf("cache dir %q: note on stderr %t, want %t: %q", cacheDir, got, cacheDir == "", r.stderr)
		}
	}
}

// TestSidecarURLFromEnvironment: without --sidecar the sidecar commands
// use SVC_SIDECAR_URL, and --sidecar wins over it.
func TestSidecarURLFromEnvironment(t *testing.T) {
	url, dead := startSidecar(t, ""), closedURL(t)
	t.Setenv(envSidecarURL, url)
	if r := run(t, "", "sidecar", "status"); r.code != 0 {
		t.Errorf("SVC_SIDECAR_URL=%s core sidecar status: exit %d\n%s%s", url, r.code, r.stdout, r.stderr)
	}
	if r := run(t, "", "--sidecar", dead, "sidecar", "status"); r.code != exitUnreachable || !strings.Contains(r.stderr, dead) {
		t.Errorf("--sidecar %s over SVC_SIDECAR_URL: exit %d, stderr %q; want 3 naming the flag's URL", dead, r.code, r.stderr)
	}
	t.Setenv(envSidecarURL, dead)
	if r := run(t, "", "sidecar", "status"); r.code != exitUnreachable || !strings.Contains(r.stderr, dead) {
		t.Errorf("SVC_SIDECAR_URL=%s: exit %d, stderr %q; want 3 naming it", dead, r.code, r.stderr)
	}
}
