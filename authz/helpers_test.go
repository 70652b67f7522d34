package authz_test

import (
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/svc-dev/svc/authz"
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

// deadAddr returns a loopback address nobody listens on: a listener was
// opened there and closed, so connecting is refused.
func deadAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// newClient returns a client of the sidecar at addr. Its timeout is far
// above what a decision takes, even under the race detector on a loaded
// machine: tests of the timeout itself set a short one of their own.
func newClient(t testing.TB, addr, mode string) *authz.Client {
	t.Helper()
	c, err := authz.NewClient(addr, authz.ClientOptions{FailMode: mode, Timeout: 30 * time.Second, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
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

// serveHTTP serves s's HTTP API on loopback and returns its base URL.
func serveHTTP(t *testing.T, s *server.Server) string {
	t.Helper()
	mux := http.NewServeMux()
	s.RegisterHTTP(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// Fixed times keep the claims of golden responses stable.
const (
	fixedIat = 1700000000 // 2023-11-14
	fixedExp = 4102444800 // 2100-01-01
)

func fixedUser(sub string, roles ...string) map[string]any {
	c := user(sub, roles...)
	c["iat"], c["exp"] = fixedIat, fixedExp
	return c
}

type httpReply struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, method, url, body string, header map[string]string) httpReply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return httpReply{status: resp.StatusCode, header: resp.Header, body: b}
}
