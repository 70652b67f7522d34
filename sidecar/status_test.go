package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/sidecar/telemetry"
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

	testkit.WriteFile(t, filepath.Join(cfg.Policy.Dir, "authz.rego"), []byte("package svc.authz\n\nallow if {"))
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

// TestStatusWhileDecisionLogRefuses: a sidecar whose decision log
// refuses decisions (overflow = "deny", the spool full behind a sink
// that took a batch and hangs on the next) is degraded with
// decision-log-unavailable, the refusals counted, although its sink has
// not failed.
func TestStatusWhileDecisionLogRefuses(t *testing.T) {
	release := make(chan struct{})
	var uploads atomic.Int32
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if uploads.Add(1) > 1 {
			<-release
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(sink.Close)
	t.Cleanup(func() { close(release) })
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	cfg.DecisionLog = config.DecisionLog{Sink: config.DecisionLogHTTP, URL: sink.URL, SpoolDir: t.TempDir(),
		Overflow: config.DecisionLogDeny, SpoolMaxBytes: 1 << 20, FlushInterval: config.Duration{Duration: 20 * time.Millisecond}}
	e := newTestEngine(t, cfg)
	r := startServer(t, Deps{Engine: e})
	testkit.Eventually(t, "serving", r.ready.Load)

	// Without a credential: refused, and logged like every answer.
	decide := func() error {
		_, err := e.Decide(context.Background(), engine.Request{Input: engine.Input{Action: "orders:read",
			Resource: policy.Resource{Type: "orders", ID: strings.Repeat("x", 4000)}}})
		return err
	}
	if err := decide(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the first record shipped", func() bool {
		d := getStatus(t, r).DecisionLog
		return d != nil && d.Shipped == 1 && d.Connected
	})
	var err error
	for n := 0; n < 2000 && err == nil; n++ {
		err = decide()
	}
	if !errors.Is(err, &reason.Error{Code: reason.DecisionLogUnavailable}) {
		t.Fatalf("with the spool full: %v, want decision-log-unavailable", err)
	}
	st := getStatus(t, r)
	if st.Status != StatusDegraded || st.Reason != string(reason.DecisionLogUnavailable) || st.DecisionLog.Refused != 1 {
		t.Fatalf("status %q reason %q decision log %+v; want degraded, decision-log-unavailable, 1 refused",
			st.Status, st.Reason, st.DecisionLog)
	}
}

// A Redis that may evict keys when full (a maxmemory and an evicting
// policy, as managed Redis services set by default) makes the status
// degraded: the logouts, replay store and budgets kept there can vanish
// without an error. Set to noeviction, the status is healthy again at
// the next check.
func TestStatusRedisEviction(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	cfg.RateLimit.RedisAddr = redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: cfg.RateLimit.RedisAddr})
	defer c.Close()
	ctx := context.Background()
	for k, v := range map[string]string{"maxmemory": "64mb", "maxmemory-policy": "volatile-lru"} {
		if err := c.ConfigSet(ctx, k, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	tel, err := telemetry.Setup(ctx, telemetry.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	r := startServer(t, Deps{Engine: newTestEngine(t, cfg), Telemetry: tel})
	testkit.Eventually(t, "serving", r.ready.Load)
	testkit.Eventually(t, "Redis checked", func() bool { return r.redis.status().CheckedAt != nil })
	st := getStatus(t, r)
	if st.Status != StatusDegraded || st.Reason != string(reason.RedisEvictsKeys) || st.Redis == nil ||
		!st.Redis.Evicts || st.Redis.MaxMemoryPolicy != "volatile-lru" || st.Redis.MaxMemory != 64<<20 {
		t.Fatalf("status %q reason %q redis %+v; want degraded, %s, volatile-lru of 64 MiB", st.Status, st.Reason, st.Redis, reason.RedisEvictsKeys)
	}
	gauge := func(want string) {
		t.Helper()
		_, body := get(t, r, PathMetrics)
		if !regexp.MustCompile(`(?m)^svc_redis_evicts(\{[^}]*\})? ` + want + `$`).Match(body) {
			t.Errorf("metrics: no svc_redis_evicts %s in\n%s", want, testkit.GrepLines(string(body), "redis"))
		}
	}
	gauge("1")

	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	r.redis.check(ctx)
	if st := getStatus(t, r); st.Status != StatusHealthy || st.Redis == nil || st.Redis.Evicts || st.Redis.MaxMemoryPolicy != "noeviction" {
		t.Fatalf("after noeviction: status %q reason %q redis %+v; want healthy", st.Status, st.Reason, st.Redis)
	}
	gauge("0")
}
