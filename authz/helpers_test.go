package authz_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const tenant = "acme"

// idp is an identity provider on loopback: it serves a JWKS with one RSA
// key and signs RS256 tokens with it.
type idp struct {
	key *rsa.PrivateKey
	kid string
	srv *httptest.Server
}

var (
	keyOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

// testKey is generated once per test binary: 2048-bit generation is slow
// under -race.
func testKey(t testing.TB) *rsa.PrivateKey {
	keyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		rsaKey = k
	})
	return rsaKey
}

func newIDP(t testing.TB) *idp {
	t.Helper()
	p := &idp{key: testKey(t), kid: "test-key-1"}
	jwks := map[string]any{"keys": []any{map[string]any{
		"kty": "RSA", "kid": p.kid, "alg": "RS256", "use": "sig",
		"n": b64(p.key.N.Bytes()),
		"e": b64(big.NewInt(int64(p.key.E)).Bytes()),
	}}}
	body, err := json.Marshal(jwks)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// token signs claims; exp defaults to one hour ahead, iat to now.
func (p *idp) token(t testing.TB, claims map[string]any) string {
	t.Helper()
	c := map[string]any{"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	header, err := json.Marshal(map[string]any{"alg": "RS256", "typ": "JWT", "kid": p.kid})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	signing := b64(header) + "." + b64(payload)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, p.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + b64(sig)
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
		cfg.SDK.JWKSURL = p.srv.URL + "/jwks"
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

func newServer(t testing.TB, d authz.Decider) *authz.Server {
	t.Helper()
	s, err := authz.NewServer(d, authz.ServerOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveGRPC serves s on a loopback TCP port and returns its address.
func serveGRPC(t testing.TB, s *authz.Server) string {
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

func newClient(t testing.TB, addr, mode string) *authz.Client {
	t.Helper()
	c, err := authz.NewClient(addr, authz.ClientOptions{FailMode: mode, Timeout: 2 * time.Second, Logger: quietLogger()})
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
