package engine_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
)

// cacheMetrics collects svc.decision_cache.* as "lookups/hit",
// "lookups/miss" and "entries".
func cacheMetrics(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	rm := metrictest.Collect(t, reader)
	got := map[string]int64{}
	for outcome, n := range metrictest.Values(rm, "svc.decision_cache.lookups", "outcome") {
		got["lookups/"+outcome] = n
	}
	if n, ok := metrictest.Values(rm, "svc.decision_cache.entries")[""]; ok {
		got["entries"] = n
	}
	return got
}

// TestEvaluateUsesDecisionCache decides one input three times: the later
// two come from the active set's decision cache, with decision ids of
// their own, and the metrics say so. Activating a policy drops the cache.
func TestEvaluateUsesDecisionCache(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	e := newEngine(t, cfg, engine.Deps{MeterProvider: mp})
	ctx := context.Background()
	in := engine.Input{
		Action:   "orders:update",
		User:     policy.User{ID: "u-1", Role: "editor", Roles: []string{"editor"}, TenantID: "acme"},
		Resource: policy.Resource{ID: "o-1", Tenant: "acme"},
		Tenant:   policy.Tenant{ID: "acme", Plan: "team"},
	}
	ids := map[string]bool{}
	for i := range 3 {
		d, err := e.Evaluate(ctx, in)
		if err != nil || !d.Allow || len(d.DenyReasons) != 0 || d.Revision != e.Policies().Revision() {
			t.Fatalf("decision %d: %+v, %v", i, d, err)
		}
		if ids[d.DecisionID] {
			t.Fatalf("decision id %q reused", d.DecisionID)
		}
		ids[d.DecisionID] = true
	}
	want := map[string]int64{"lookups/hit": 2, "lookups/miss": 1, "entries": 1}
	if diff := cmp.Diff(want, cacheMetrics(t, reader)); diff != "" {
		t.Fatalf("metrics differ (-want +got):\n%s", diff)
	}

	closed, err := policy.FromModules(map[string]string{"closed.rego": "package svc.authz\n\ndefault allow := false\n\ndeny_reasons contains \"closed\" if not allow\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetPolicies(closed)
	if d, err := e.Evaluate(ctx, in); err != nil || d.Allow || !equal(d.DenyReasons, []string{"closed"}) {
		t.Fatalf("after activation: %+v, %v", d, err)
	}
	want = map[string]int64{"lookups/hit": 0, "lookups/miss": 1, "entries": 1}
	if diff := cmp.Diff(want, cacheMetrics(t, reader)); diff != "" {
		t.Fatalf("metrics after activation differ (-want +got):\n%s", diff)
	}
}

// TestDecisionCacheSizeSetting: policy.decision_cache_size bounds the
// decision cache of the policy the engine loads, so that a deployment
// with more tenants than the default holds can make room for them.
func TestDecisionCacheSizeSetting(t *testing.T) {
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	cfg.Policy.DecisionCacheSize = 32
	e := newEngine(t, cfg, engine.Deps{})
	ctx := context.Background()
	// Enough inputs that each of the cache's 16 shards, which keys reach
	// by their random hash, surely receives more than its 2 entries.
	const inputs = 1000
	for i := range inputs {
		tenant := "t-" + strconv.Itoa(i)
		in := engine.Input{
			Action:   "orders:read",
			User:     policy.User{ID: "u-1", Role: "viewer", Roles: []string{"viewer"}, TenantID: tenant},
			Resource: policy.Resource{ID: "o-1", Tenant: tenant},
			Tenant:   policy.Tenant{ID: tenant},
		}
		if _, err := e.Evaluate(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if _, misses, entries, enabled := e.Policies().CacheStats(); !enabled || entries != 32 || misses != inputs {
		t.Fatalf("cache enabled %v with %d entries after %d misses, want 32 entries after %d", enabled, entries, misses, inputs)
	}
}
