package sidecar

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/envoy"
)

// BenchmarkHTTPDecision measures one decision through the sidecar's whole
// HTTP handler, as svc-sidecar composes it (guards, server span, engine
// with telemetry, audit log and rate limiter), in process, without the
// network: POST /v1/authorize of the local API and GET /check of the
// nginx convention. "unwatched": nobody tails traces and no OTLP endpoint
// is set, the production default, so no span is recorded; "watched": a
// trace tail subscribes to the span feed, so the server span and the
// engine's spans are recorded.
func BenchmarkHTTPDecision(b *testing.B) {
	idp := newTestIdP(b)
	sc := startBenchSidecar(b, idp)
	tok := idp.token(b, "alice", testTenant, "viewer")
	body := []byte(`{"token":"` + tok + `","action":"orders:read","resource":{"id":"o-1"}}`)
	host := sc.HTTPAddr().String()
	cases := []struct {
		name string
		req  func() *http.Request
	}{
		{"authorize", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, authz.PathAuthorize, bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
		{"check", func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, envoy.CheckPath, nil)
			r.Header.Set("Authorization", "Bearer "+tok)
			r.Header.Set("X-Original-URI", "/orders/42")
			r.Header.Set("X_Svc_Method", http.MethodGet)
			return r
		}},
	}
	for _, bc := range cases {
		for _, watched := range []bool{false, true} {
			name := bc.name + "/unwatched"
			if watched {
				name = bc.name + "/watched"
			}
			b.Run(name, func(b *testing.B) {
				if watched {
					watchSpans(b, sc)
				}
				b.ReportAllocs()
				for b.Loop() {
					req := bc.req()
					req.RemoteAddr, req.Host = "127.0.0.1:40000", host
					rec := httptest.NewRecorder()
					sc.http.Handler.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("status %d: %s", rec.Code, rec.Body)
					}
				}
			})
		}
	}
}

// watchSpans has a trace tail subscribe to sc's span feed until b ends,
// so that every span is recorded.
func watchSpans(b *testing.B, sc *running) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	sub := sc.deps.Telemetry.Spans().Watch(ctx, nil, time.Time{})
	go func() {
		for range sub.C {
		}
	}()
}
