package envoy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/audittest"
)

type recordSink = audittest.Sink

// auditedEngine is the engine of cfg, its audit records kept in the sink
// it returns; deps adds to the engine's dependencies (an observer).
func auditedEngine(t *testing.T, idp *testIdP, cfg config.Config, deps engine.Deps) (*engine.Engine, *recordSink) {
	t.Helper()
	sink := &recordSink{}
	deps.Logger, deps.HTTPClient, deps.Audit = quietLogger(), idp.Client(), sink
	e, err := engine.New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, sink
}

// plainAuthorizer asks its Authorizer with the request's headers and
// query built up front and its canonical path left to the engine, as an
// Authorizer that honours neither engine.Request.Completer nor
// engine.Request.Canonical would.
type plainAuthorizer struct{ Authorizer }

func (p plainAuthorizer) Decide(ctx context.Context, req engine.Request) (engine.Result, error) {
	if req.Completer != nil {
		req.Completer.CompleteRequest(req.Input.Request)
		req.Completer = nil
	}
	req.Canonical = false
	return p.Authorizer.Decide(ctx, req)
}

// TestCheckAuditSource: a decision asked over ext_authz is audited with
// source "envoy", whether the Authorizer defers the request's headers and
// query (the engine) or not; one asked by an HTTP check with
// "http-check".
func TestCheckAuditSource(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp, config.FailClosed)
	e, sink := auditedEngine(t, idp, cfg, engine.Deps{})
	tok := idp.token(t, map[string]any{"sub": "u-1", "tenant_id": testTenant, "roles": []string{"viewer"}})
	req := checkReq("GET", "/api/orders/42", map[string]string{"authorization": "Bearer " + tok}, nil)
	for name, az := range map[string]Authorizer{"engine": e, "plain authorizer": plainAuthorizer{e}} {
		t.Run(name, func(t *testing.T) {
			resp, err := newTestServer(t, cfg, az).Check(context.Background(), req)
			if err != nil || resp.GetOkResponse() == nil {
				t.Fatalf("check not allowed: %v %v", resp, err)
			}
			if got := sink.Last(t).Source; got != SourceEnvoy {
				t.Errorf("audit source = %q, want %q", got, SourceEnvoy)
			}
		})
	}
	mux := http.NewServeMux()
	newTestServer(t, cfg, e).RegisterHTTP(mux)
	r := httptest.NewRequest("GET", "/check", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("X-Original-URI", "/api/orders/42")
	r.Header.Set("X_Svc_Method", "GET")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP check: status %d", rec.Code)
	}
	if got := sink.Last(t).Source; got != SourceHTTPCheck {
		t.Errorf("HTTP check audit source = %q, want %q", got, SourceHTTPCheck)
	}
}

// allowedCheck is a Server on the real engine, rate limits off, and an
// Envoy-shaped request it allows.
func allowedCheck(t *testing.T) (*Server, *authv3.CheckRequest) {
	t.Helper()
	idp := newTestIdP(t)
	cfg := testConfig(idp, config.FailClosed)
	cfg.RateLimit.Disabled = true
	s := newTestServer(t, cfg, newTestEngine(t, cfg, idp))
	tok := idp.token(t, map[string]any{"sub": "u-1", "tenant_id": testTenant, "roles": []string{"editor", "billing"}})
	return s, checkReq("GET", "/api/orders/42?page=2", map[string]string{
		":authority": "shop.example", ":method": "GET", ":path": "/api/orders/42?page=2",
		"authorization": "Bearer " + tok, "accept": "application/json",
		"user-agent": "bench/1.0", "x-request-id": "9b1d3a4e-1c2f-4a5b-8c7d-0e1f2a3b4c5d",
	}, nil)
}

// TestCheckAllocs guards the allocations of an allowed Check in process on
// the real engine, token and decision both cached (BenchmarkCheck/engine).
func TestCheckAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	s, req := allowedCheck(t)
	ctx := context.Background()
	check := func() {
		resp, err := s.Check(ctx, req)
		if err != nil || resp.GetOkResponse() == nil {
			t.Fatalf("check not allowed: %v %v", resp, err)
		}
	}
	check()
	if allocs := testing.AllocsPerRun(200, check); allocs > 8 {
		t.Errorf("allowed Check: %v allocations, want at most 8", allocs)
	}
}

// TestCheckAnswerAllocs guards the allocations of an allowed Check as the
// gRPC service answers it (the CheckAnswer, encoded from its verdict):
// two fewer than Check's, which builds the dynamic metadata's map.
func TestCheckAnswerAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	s, req := allowedCheck(t)
	ctx := context.Background()
	buf := make([]byte, 4096)
	check := func() {
		a := s.answer(ctx, req)
		var enc CheckResponseEncoder
		size, ok := enc.PrepareAnswer(a)
		if !a.v.allow || !ok || enc.Encode(buf[:size]) != nil {
			t.Fatal("check not allowed and encoded")
		}
	}
	check()
	checkResp := func() {
		if _, err := s.Check(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	answer, response := testing.AllocsPerRun(200, check), testing.AllocsPerRun(200, checkResp)
	t.Logf("allocations: answer %v, Check %v", answer, response)
	if answer > 6 || answer > response-2 {
		t.Errorf("allowed Check answered and encoded: %v allocations, want at most 6 and Check's (%v) less 2", answer, response)
	}
}

// TestCheckHandlerInterceptorAllocs: with an interceptor, as the sidecar
// serves, the Check handler hands it the server info and the handler made
// once by New, so an intercepted call allocates no more than the answer.
func TestCheckHandlerInterceptorAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	s, req := allowedCheck(t)
	ctx := context.Background()
	var infos []*grpc.UnaryServerInfo
	intercept := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if len(infos) < 2 {
			infos = append(infos, info)
		}
		return h(ctx, req)
	}
	dec := func(v any) error {
		v.(*IncomingCheck).Request.Attributes = req.Attributes
		return nil
	}
	call := func() {
		out, err := checkHandler(s, ctx, dec, intercept)
		if a, ok := out.(*CheckAnswer); err != nil || !ok || !a.v.allow {
			t.Fatalf("intercepted Check: %T %v", out, err)
		}
	}
	call()
	call()
	if infos[0] != infos[1] || infos[0].FullMethod != authv3.Authorization_Check_FullMethodName || infos[0].Server != s {
		t.Errorf("server info %+v, then %p: want one made by New", infos[0], infos[1])
	}
	direct := testing.AllocsPerRun(200, func() {
		if a := s.answer(ctx, req); !a.v.allow {
			t.Fatal("not allowed")
		}
	})
	intercepted := testing.AllocsPerRun(200, call)
	// The decoded request is the handler's one allocation of its own.
	if intercepted > direct+1 {
		t.Errorf("intercepted Check: %v allocations, the answer alone %v: want at most one more", intercepted, direct)
	}
}
