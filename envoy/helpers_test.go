package envoy

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/reason"
)

// testIdP is the loopback identity provider, serving its JWKS over TLS,
// with this package's token defaults.
type testIdP struct{ *idptest.IdP }

func newTestIdP(t testing.TB) *testIdP { return &testIdP{idptest.New(t, idptest.WithTLS())} }

// token signs claims; exp, iat and sub get defaults when absent, and a nil
// claim removes the default.
func (p *testIdP) token(t testing.TB, claims map[string]any) string {
	t.Helper()
	now := time.Now()
	defaults := map[string]any{"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(), "sub": "user-1"}
	return p.Token(t, idptest.Override(defaults, claims))
}

// testConfig is a verified-token deployment of tenant testTenant.
func testConfig(p *testIdP, failMode string) config.Config {
	var cfg config.Config
	cfg.SDK.TenantID = testTenant
	cfg.SDK.FailMode = failMode
	cfg.SDK.JWKSURL = p.JWKSURL()
	cfg.Audit.Destination = config.AuditOff
	cfg.Sidecar.Routes = testRoutes
	cfg.Tenants = map[string]config.Tenant{testTenant: {Plan: "enterprise"}}
	return cfg
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestEngine starts a real engine on cfg; p (may be nil in development
// mode) provides the JWKS client.
func newTestEngine(t testing.TB, cfg config.Config, p *testIdP) *engine.Engine {
	t.Helper()
	deps := engine.Deps{Logger: quietLogger()}
	if p != nil {
		deps.HTTPClient = p.Client()
	}
	e, err := engine.New(cfg, deps)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func newTestServer(t testing.TB, cfg config.Config, az Authorizer) *Server {
	t.Helper()
	s, err := New(cfg, az, Deps{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// serveGRPC runs s on a loopback listener and returns a client.
func serveGRPC(t testing.TB, s *Server) authv3.AuthorizationClient {
	t.Helper()
	return authv3.NewAuthorizationClient(testkit.DialGRPC(t, testkit.ServeGRPC(t, s.Register)))
}

// authorizerFunc adapts a function to Authorizer.
type authorizerFunc func(ctx context.Context, req engine.Request) (engine.Result, error)

func (f authorizerFunc) Decide(ctx context.Context, req engine.Request) (engine.Result, error) {
	return f(ctx, req)
}

// allowWithoutWork is an Authorizer that allows without work: an allowed user u-1
// of the test tenant, the decision of the policy, the request's input.
var allowWithoutWork = authorizerFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
	return engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "u-1", TenantID: testTenant},
		Decision: engine.Decision{Allow: true, DecisionID: "0b7f4d2c-8a3e-4c1b-9f6d-2e5a7c9b1d3f", Reason: reason.PolicyAllow},
		Input:    req.Input,
	}, nil
})
