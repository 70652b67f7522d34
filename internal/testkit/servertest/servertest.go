// Package servertest holds what the tests of the Go client (authz) and of
// the server side (authz/server) share: a loopback identity provider with
// their token defaults, users of one tenant, a real engine, a server on a
// loopback port, and an application behind the Go SDK's middleware. It is
// for tests only.
package servertest

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// Tenant is the deployment's tenant in these tests.
const Tenant = "acme"

// IDP is the loopback identity provider with the tests' token defaults.
type IDP struct{ *idptest.IdP }

// NewIDP starts an identity provider for the test.
func NewIDP(t testing.TB) *IDP { return &IDP{idptest.New(t)} }

// TokenFor signs claims; exp defaults to one hour ahead, iat to now, and
// a nil claim removes the default.
func (p *IDP) TokenFor(t testing.TB, claims map[string]any) string {
	t.Helper()
	defaults := map[string]any{"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	return p.Token(t, idptest.Override(defaults, claims))
}

// User returns the claims of a user of Tenant with the given roles.
func User(sub string, roles ...string) map[string]any {
	rs := make([]any, len(roles))
	for i, r := range roles {
		rs[i] = r
	}
	return map[string]any{
		"sub": sub, "tenant_id": Tenant, "roles": rs, "email": sub + "@example.com",
		"department": "sales", "clearance": map[string]any{"level": 3, "tags": []any{"a", "b"}},
	}
}

// QuietLogger discards everything.
func QuietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// EchoUser is the application behind the Go SDK's middleware in tests: it
// answers 200 with the authz.User the middleware stored, as JSON, and 500
// when the request's context holds none.
var EchoUser http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	u, ok := authz.UserFrom(r.Context())
	if !ok {
		http.Error(w, "no user in context", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(u)
})

// Protect serves EchoUser behind authz.Middleware(a, opts), which logs to
// QuietLogger, on a loopback server closed when t ends.
func Protect(t testing.TB, a authz.Authorizer, opts authz.MiddlewareOptions) *httptest.Server {
	t.Helper()
	opts.Logger = QuietLogger()
	srv := httptest.NewServer(authz.Middleware(a, opts)(EchoUser))
	t.Cleanup(srv.Close)
	return srv
}

// NewEngine builds a real engine verifying tokens against p (nil: none,
// development mode unless mutate adds an identity source).
func NewEngine(t testing.TB, p *IDP, mutate func(*config.Config)) *engine.Engine {
	t.Helper()
	cfg := config.Config{
		SDK:       config.SDK{TenantID: Tenant, FailMode: config.FailClosed},
		Tenants:   map[string]config.Tenant{Tenant: {Plan: "team"}},
		RateLimit: config.RateLimit{Disabled: true},
	}
	if p != nil {
		cfg.SDK.JWKSURL = p.JWKSURL()
	} else {
		cfg.SDK.FailMode = config.FailOpen
	}
	if mutate != nil {
		mutate(&cfg)
	}
	e, err := engine.New(cfg, engine.Deps{Logger: QuietLogger()})
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// NewServer builds the gRPC and HTTP service over d.
func NewServer(t testing.TB, d server.Decider) *server.Server {
	t.Helper()
	s, err := server.New(d, server.Options{Logger: QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ServeGRPC serves s on a loopback TCP port and returns its address.
func ServeGRPC(t testing.TB, s *server.Server) string {
	t.Helper()
	return testkit.ServeGRPC(t, func(g *grpc.Server) { s.Register(g) })
}

// Fixed times keep the claims of golden responses stable.
const (
	FixedIat = 1700000000 // 2023-11-14
	FixedExp = 4102444800 // 2100-01-01
)

// FixedUser is User with fixed iat and exp.
func FixedUser(sub string, roles ...string) map[string]any {
	c := User(sub, roles...)
	c["iat"], c["exp"] = FixedIat, FixedExp
	return c
}

// ServeHTTP serves s's HTTP API on loopback and returns its base URL.
func ServeHTTP(t *testing.T, s *server.Server) string {
	t.Helper()
	mux := http.NewServeMux()
	s.RegisterHTTP(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Reply is an HTTP answer read whole.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Post sends body to url with method and header and reads the answer.
func Post(t *testing.T, method, url, body string, header map[string]string) Reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, b := testkit.Do(t, nil, req)
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}
