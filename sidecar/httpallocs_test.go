package sidecar

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc-dev/svc/envoy"
)

// maxCheckAllocs bounds the allocations of one allowed nginx GET /check
// through the sidecar's whole HTTP handler, the request and recorder
// being built beforehand (BenchmarkHTTPDecision counts 18 more, theirs).
// 34 when it was set, of which 21 in engine.Authorize and below, 5 in the
// mapping to policy input and 3 in the recorder's copy of the headers at
// WriteHeader (net/http's own ResponseWriter makes it too); 50 before the
// HTTP layer was trimmed.
const maxCheckAllocs = 36

// TestHTTPCheckAllocs guards the allocation count of the HTTP /check
// decision (BenchmarkHTTPDecision/check/unwatched): it fails when one of
// the allocations the HTTP layer no longer makes comes back.
func TestHTTPCheckAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race changes allocation counts")
	}
	if testing.Short() {
		t.Skip("starts a sidecar")
	}
	idp := newTestIdP(t)
	sc := startBenchSidecar(t, idp)
	tok := idp.token(t, "alice", testTenant, "viewer")
	host := sc.HTTPAddr().String()
	const runs = 500
	reqs := make([]*http.Request, runs+2) // AllocsPerRun warms up once
	recs := make([]*httptest.ResponseRecorder, len(reqs))
	for i := range reqs {
		r := httptest.NewRequest(http.MethodGet, envoy.CheckPath, nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("X-Original-URI", "/orders/42")
		r.Header.Set("X-Original-Method", http.MethodGet)
		r.RemoteAddr, r.Host = "127.0.0.1:40000", host
		reqs[i], recs[i] = r, httptest.NewRecorder()
	}
	// Warm the token and decision caches as a steady stream of checks does.
	sc.http.Handler.ServeHTTP(httptest.NewRecorder(), reqs[len(reqs)-1].Clone(t.Context()))
	i := 0
	got := testing.AllocsPerRun(runs, func() {
		sc.http.Handler.ServeHTTP(recs[i], reqs[i])
		i++
	})
	for j := range i {
		if recs[j].Code != http.StatusOK || recs[j].Header().Get("X-Svc-User-Id") != "alice" {
			t.Fatalf("check %d: status %d, headers %v", j, recs[j].Code, recs[j].Header())
		}
	}
	t.Logf("%.0f allocations per /check", got)
	if got > maxCheckAllocs {
		t.Errorf("%.0f allocations per HTTP /check, want at most %d", got, maxCheckAllocs)
	}
}
