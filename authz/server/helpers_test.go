package server_test

import (
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/idptest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const tenant = "acme"

// idp is the loopback identity provider with this package's token
// defaults.
type idp struct{ *idptest.IdP }

func newIDP(t testing.TB) *idp { return &idp{idptest.New(t)} }

// token signs claims; exp defaults to one hour ahead, iat to now, and a
// nil claim removes the default.
func (p *idp) token(t testing.TB, claims map[string]any) string {
	t.Helper()
	defaults := map[string]any{"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	return p.Token(t, idptest.Override(defaults, claims))
}

// user returns the claims of a user of tenant acme with the given roles.
func user(sub string, roles ...string) map[string]any {
	rs := make([]any, len(roles))
	for i, r := range roles {
		rs[i] = r
	}
	return map[string]any{
		"sub": sub, "tenant_id": tenant, "roles": rs, "email": sub + "@example.com",
		"department": "sales", "clearance": map[string]any{"level": 3, "tags": []any{"a", "b"}},
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newEngine builds a real engine verifying tokens against p (nil: none,
// development mode when fail_mode is open).
func newEngine(t testing.TB, p *idp, mutate func(*config.Config)) *engine.Engine {
	t.Helper()
	cfg := config.Config{
		SDK:       config.SDK{TenantID: tenant, FailMode: config.FailClosed},
		Tenants:   map[string]config.Tenant{tenant: {Plan: "team"}},
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
	e, err := engine.New(cfg, engine.Deps{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func newServer(t testing.TB, d server.Decider) *server.Server {
	t.Helper()
	s, err := server.New(d, server.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveGRPC serves s on a loopback TCP port and returns its address.
func serveGRPC(t testing.TB, s *server.Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	t.Cleanup(func() {
		g.GracefulStop()
		if err := <-done; err != nil {
			t.Errorf("grpc serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// golden compares got with testdata/<name>, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from the golden file:\n got: %s\nwant: %s", name, got, want)
	}
}
