package sidecar

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/envoy"
	"github.com/svc-dev/svc/internal/testkit"
)

// Bounds of the allocations of one allowed decision through the
// sidecar's whole HTTP handler, the request and recorder being built
// beforehand (BenchmarkHTTPDecision counts theirs too, 18 for /check).
//
// maxCheckAllocs, nginx's GET /check: 10 when it was last set, of which
// 3 in the recorder's copy of the headers at WriteHeader (net/http's own
// ResponseWriter makes it too); 14 before the check reused its header
// maps and kept the answer's header values with the mapped request, 34
// before the engine's were trimmed, 50 before the HTTP layer was.
//
// maxAuthorizeAllocs, POST /v1/authorize: 34 when it was set, of which
// 21 in engine.Authorize and below; 119 before.
const (
	maxCheckAllocs     = 12
	maxAuthorizeAllocs = 36
)

// TestHTTPDecisionAllocs guards the allocation counts of HTTP decisions
// (BenchmarkHTTPDecision/*/unwatched): it fails when one of the
// allocations the HTTP layer no longer makes comes back.
func TestHTTPDecisionAllocs(t *testing.T) {
	idp, sc := startAllocsSidecar(t)
	tok := idp.token(t, "alice", testTenant, "viewer")
	host := sc.HTTPAddr().String()
	body := `{"token":"` + tok + `","action":"orders:read","resource":{"id":"o-1"}}`
	cases := []struct {
		name string
		max  int
		req  func() *http.Request
	}{
		{"check", maxCheckAllocs, func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, envoy.CheckPath, nil)
			r.Host = host
			r.Header.Set("Authorization", "Bearer "+tok)
			r.Header.Set("X-Original-URI", "/orders/42")
			r.Header.Set("X_Svc_Method", http.MethodGet)
			return r
		}},
		{"authorize", maxAuthorizeAllocs, func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, authz.PathAuthorize, strings.NewReader(body))
			r.Host = host
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// AllocsPerRun counts the whole process's allocations: the
			// least of three counts leaves out what the sidecar's
			// background work allocates meanwhile, and a regression shows
			// in all three.
			got := math.Inf(1)
			for range 3 {
				got = min(got, decisionAllocs(t, sc.http.Handler, tc.req))
			}
			t.Logf("%.0f allocations per %s", got, tc.name)
			if got > float64(tc.max) {
				t.Errorf("%.0f allocations per HTTP %s, want at most %d", got, tc.name, tc.max)
			}
		})
	}
}

// decisionAllocs is the average allocation count of handler answering a
// decision request made by req, each request and recorder built
// beforehand, after a first request has warmed the token and decision
// caches as a steady stream does.
func decisionAllocs(t *testing.T, handler http.Handler, req func() *http.Request) float64 {
	t.Helper()
	const runs = 500
	reqs := make([]*http.Request, runs+2) // AllocsPerRun warms up once
	recs := make([]*httptest.ResponseRecorder, len(reqs))
	for i := range reqs {
		r := req()
		r.RemoteAddr = "127.0.0.1:40000"
		reqs[i], recs[i] = r, httptest.NewRecorder()
	}
	i := len(reqs) - 1
	handler.ServeHTTP(recs[i], reqs[i])
	i = 0
	got := testing.AllocsPerRun(runs, func() {
		handler.ServeHTTP(recs[i], reqs[i])
		i++
	})
	for j := range i {
		if recs[j].Code != http.StatusOK {
			t.Fatalf("request %d: status %d: %s", j, recs[j].Code, recs[j].Body)
		}
	}
	return got
}

// startAllocsSidecar starts the benchmarks' sidecar for a test of
// allocation counts, which the race detector's own allocations would
// falsify and which -short leaves out.
func startAllocsSidecar(t *testing.T) (*testIdP, *running) {
	t.Helper()
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("starts a sidecar")
	}
	idp := newTestIdP(t)
	return idp, startBenchSidecar(t, idp)
}
