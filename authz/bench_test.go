package authz_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/internal/testkit/servertest"
)

// BenchmarkClient measures one decision through the SDK and the sidecar's
// gRPC service over loopback TCP, with a real RS256 token (verified once,
// then served from the engine's token cache) and the default policy.
func BenchmarkClient(b *testing.B) {
	p := servertest.NewIDP(b)
	addr := servertest.ServeGRPC(b, servertest.NewServer(b, servertest.NewEngine(b, p, nil)))
	c := newClient(b, addr, authz.FailClosed)
	tok := p.TokenFor(b, servertest.User("alice", "viewer"))

	b.Run("ValidateToken", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if d, err := c.ValidateToken(b.Context(), tok); err != nil || !d.Allowed {
					b.Errorf("%+v, %v", d, err)
					return
				}
			}
		})
	})
	b.Run("Authorize", func(b *testing.B) {
		b.ReportAllocs()
		req := authz.AuthorizeRequest{Token: tok, Action: "orders:read", Resource: authz.Resource{ID: "o-1"}}
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if d, err := c.Authorize(b.Context(), req); err != nil || !d.Allowed {
					b.Errorf("%+v, %v", d, err)
					return
				}
			}
		})
	})
}

// BenchmarkHTTPAuthorize measures POST /v1/authorize in-process: JSON
// decoding, the decision and protojson encoding.
func BenchmarkHTTPAuthorize(b *testing.B) {
	p := servertest.NewIDP(b)
	mux := http.NewServeMux()
	servertest.NewServer(b, servertest.NewEngine(b, p, nil)).RegisterHTTP(mux)
	body := []byte(`{"token":"` + p.TokenFor(b, servertest.User("alice", "viewer")) + `","action":"orders:read","resource":{"id":"o-1"}}`)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, authz.PathAuthorize, bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkMiddleware measures the middleware on an in-process engine,
// with and without a policy check.
func BenchmarkMiddleware(b *testing.B) {
	p := servertest.NewIDP(b)
	a := server.Local(servertest.NewEngine(b, p, nil))
	tok := "Bearer " + p.TokenFor(b, servertest.User("alice", "viewer"))
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, bc := range []struct {
		name string
		opts authz.MiddlewareOptions
	}{
		{"token", authz.MiddlewareOptions{}},
		{"policy", authz.MiddlewareOptions{Action: func(*http.Request) string { return "orders:read" }}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := authz.Middleware(a, bc.opts)(ok)
			req := httptest.NewRequest(http.MethodGet, "/orders/o-1", nil)
			req.Header.Set("Authorization", tok)
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
