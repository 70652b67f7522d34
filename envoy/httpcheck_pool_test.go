package envoy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
)

// TestHTTPCheckHeaderMapsReused: the HTTP check's lower-cased header maps
// are reused from one check to the next (pooledLowerHeaders), and no
// check ever sees another's headers: a policy that allows on the header
// x-team: blue allows exactly the requests that carry it, one after the
// other and from many callers at once, whether the engine builds
// input.request.headers for the policy alone or for an observer too,
// and the input the observer sees is the request's own.
func TestHTTPCheckHeaderMapsReused(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp, config.FailClosed)
	cfg.RateLimit.Disabled = true
	obs := &inputObserver{}
	e, err := engine.New(cfg, engine.Deps{Logger: quietLogger(), HTTPClient: idp.Client(), Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	set, err := policy.FromModules(map[string]string{"p.rego": "package svc.authz\n\n" + deferredPolicies["a header"] + "\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetPolicies(set)
	mux := http.NewServeMux()
	newTestServer(t, cfg, e).RegisterHTTP(mux)
	tok := idp.token(t, map[string]any{"sub": "u-1", "tenant_id": testTenant, "roles": []string{"viewer"}})

	// check sends request i: every other one carries x-team: blue, the
	// others red or nothing, each with a header of its own.
	check := func(i int) (status int, team, own string) {
		r := httptest.NewRequest(http.MethodGet, CheckPath, nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("X-Forwarded-Method", http.MethodGet)
		r.Header.Set("X-Forwarded-Uri", "/api/orders/42")
		switch i % 4 {
		case 0, 2:
			team = "blue"
		case 1:
			team = "red"
		}
		if team != "" {
			r.Header.Set("X-Team", team)
		}
		own = fmt.Sprintf("x-own-%d", i)
		r.Header.Set(own, "1")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		return rec.Code, team, own
	}
	want := func(team string) int {
		if team == "blue" {
			return http.StatusOK
		}
		return http.StatusForbidden
	}

	for _, observing := range []bool{false, true} {
		obs.set(observing)
		for i := range 40 {
			status, team, own := check(i)
			if status != want(team) {
				t.Fatalf("observing %v, request %d (x-team %q): status %d, want %d", observing, i, team, status, want(team))
			}
			seen := obs.set(observing)
			if !observing {
				continue
			}
			if len(seen) != 1 {
				t.Fatalf("request %d: observer saw %d decisions, want 1", i, len(seen))
			}
			h := seen[0].Headers
			if h["x-team"] != team || h[own] != "1" || len(h) != 1+min(len(team), 1) {
				t.Fatalf("request %d (x-team %q, %s): observed headers %q", i, team, own, h)
			}
		}
	}

	obs.set(false)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for c := range 8 {
		wg.Go(func() {
			for i := c; i < 8*300; i += 8 {
				if status, team, _ := check(i); status != want(team) {
					errs <- fmt.Errorf("request %d (x-team %q): status %d, want %d", i, team, status, want(team))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestReleaseHeaders: a released map comes back empty, and one too large
// to be worth clearing is not kept.
func TestReleaseHeaders(t *testing.T) {
	h := http.Header{"Authorization": {"Bearer x"}, "X-Team": {"blue"}}
	m := pooledLowerHeaders(h)
	if len(m) != 2 || m["x-team"] != "blue" {
		t.Fatalf("pooledLowerHeaders = %q", m)
	}
	releaseHeaders(m)
	if len(m) != 0 {
		t.Errorf("released map holds %q", m)
	}
	big := http.Header{}
	for i := range maxPooledHeaders + 1 {
		big.Set(fmt.Sprintf("X-H-%d", i), "v")
	}
	m = pooledLowerHeaders(big)
	releaseHeaders(m)
	if len(m) != maxPooledHeaders+1 {
		t.Errorf("a map of %d headers was cleared and pooled", maxPooledHeaders+1)
	}
	releaseHeaders(nil)
}
