package envoy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
)

// BenchmarkCheck measures Server.Check in process: "engine" with the real
// engine (RS256 token, verified once then cached; default policy), "mapping"
// with an authorizer that allows without work, which leaves the cost of
// mapping the request and building the response.
func BenchmarkCheck(b *testing.B) {
	idp := newTestIdP(b)
	cfg := testConfig(idp, config.FailClosed)
	cfg.RateLimit.Disabled = true
	tok := idp.token(b, map[string]any{"sub": "u-1", "tenant_id": testTenant, "roles": []string{"editor", "billing"}})
	req := checkReq("GET", "/api/orders/42?page=2", map[string]string{
		":authority": "shop.example", ":method": "GET", ":path": "/api/orders/42?page=2",
		"authorization": "Bearer " + tok, "accept": "application/json",
		"user-agent": "bench/1.0", "x-request-id": "9b1d3a4e-1c2f-4a5b-8c7d-0e1f2a3b4c5d",
	}, nil)

	for _, bc := range []struct {
		name string
		az   Authorizer
	}{
		{"engine", newTestEngine(b, cfg, idp)},
		{"mapping", allowWithoutWork},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := newTestServer(b, cfg, bc.az)
			ctx := context.Background()
			resp, err := s.Check(ctx, req)
			if err != nil || resp.GetOkResponse() == nil {
				b.Fatalf("warm-up check not allowed: %v %v", resp, err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := s.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFromCheckRequest measures the mapping alone.
func BenchmarkFromCheckRequest(b *testing.B) {
	m, err := NewMapper(testTenant, testRoutes)
	if err != nil {
		b.Fatal(err)
	}
	req := checkReq("DELETE", "/t/acme/orders/42?force=true", map[string]string{
		"authorization": "Bearer x.y.z", "accept": "application/json", "x-request-id": "r-1",
	}, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := m.FromCheckRequest(req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHTTPCheck measures the nginx convention of the HTTP check mode
// on the real engine, without the network.
func BenchmarkHTTPCheck(b *testing.B) {
	idp := newTestIdP(b)
	cfg := testConfig(idp, config.FailClosed)
	cfg.RateLimit.Disabled = true
	s := newTestServer(b, cfg, newTestEngine(b, cfg, idp))
	mux := http.NewServeMux()
	s.RegisterHTTP(mux)
	req := httptest.NewRequest("GET", "/check", nil)
	req.Header.Set("Authorization", "Bearer "+idp.token(b, map[string]any{"tenant_id": testTenant, "role": "viewer"}))
	req.Header.Set("X-Original-URI", "/api/orders/42")
	req.Header.Set("X_Svc_Method", "GET")
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}

// noopAuthorization answers OK without work: the baseline of the loopback
// benchmark.
type noopAuthorization struct{}

func (noopAuthorization) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{Status: &rpcstatus.Status{}}, nil
}

// BenchmarkCheckLoopback measures Check over loopback gRPC with several
// concurrent clients, for an ext_authz server that answers OK without work
// and for the sidecar (real engine, RS256 token, default policy), in the
// same run. It reports both per-check wall times and their ratio
// (x-noop), the figure the design's bar is stated in.
func BenchmarkCheckLoopback(b *testing.B) {
	const clients = 8
	idp := newTestIdP(b)
	cfg := testConfig(idp, config.FailClosed)
	cfg.RateLimit.Disabled = true
	sidecar := serveGRPC(b, newTestServer(b, cfg, newTestEngine(b, cfg, idp)))

	noopAddr := testkit.ServeGRPC(b, func(g *grpc.Server) { authv3.RegisterAuthorizationServer(g, noopAuthorization{}) })
	noop := authv3.NewAuthorizationClient(testkit.DialGRPC(b, noopAddr))

	tok := idp.token(b, map[string]any{"sub": "u-1", "tenant_id": testTenant, "roles": []string{"editor"}})
	req := checkReq("GET", "/api/orders/42", map[string]string{"authorization": "Bearer " + tok, "accept": "application/json"}, nil)
	run := func(c authv3.AuthorizationClient, n int) time.Duration {
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range clients {
			wg.Go(func() {
				for next.Add(1) <= int64(n) {
					resp, err := c.Check(context.Background(), req)
					if err != nil || resp.GetStatus().GetCode() != 0 {
						b.Errorf("check: %v %v", resp.GetStatus(), err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	run(noop, 200)
	run(sidecar, 200)
	b.ResetTimer()
	base := run(noop, b.N)
	side := run(sidecar, b.N)
	b.StopTimer()
	b.ReportMetric(float64(side.Nanoseconds())/float64(b.N), "ns/check")
	b.ReportMetric(float64(base.Nanoseconds())/float64(b.N), "ns/noop-check")
	b.ReportMetric(float64(side)/float64(base), "x-noop")
}
