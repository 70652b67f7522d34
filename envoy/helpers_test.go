package envoy

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
)

// idpKey is generated once per test binary: RSA generation is slow.
var idpKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

const idpKID = "test-key-1"

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// testIdP serves a JWKS over TLS on loopback and signs RS256 tokens with
// its key, as an identity provider would.
type testIdP struct {
	srv *httptest.Server
}

func newTestIdP(t testing.TB) *testIdP {
	t.Helper()
	pub := idpKey().PublicKey
	body, err := json.Marshal(map[string]any{"keys": []map[string]any{{
		"kty": "RSA", "kid": idpKID, "use": "sig", "alg": "RS256",
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return &testIdP{srv: srv}
}

func (p *testIdP) url() string { return p.srv.URL + "/jwks.json" }

// token signs claims; exp, iat and sub get defaults when absent.
func (p *testIdP) token(t testing.TB, claims map[string]any) string {
	t.Helper()
	now := time.Now()
	c := map[string]any{"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(), "sub": "user-1"}
	for k, v := range claims {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	hdr, err := json.Marshal(map[string]any{"alg": "RS256", "typ": "JWT", "kid": idpKID})
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	signing := b64(hdr) + "." + b64(payload)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, idpKey(), crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + b64(sig)
}

// testConfig is a verified-token deployment of tenant testTenant.
func testConfig(p *testIdP, failMode string) config.Config {
	var cfg config.Config
	cfg.SDK.TenantID = testTenant
	cfg.SDK.FailMode = failMode
	cfg.SDK.JWKSURL = p.url()
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
		deps.HTTPClient = p.srv.Client()
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
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return authv3.NewAuthorizationClient(conn)
}

// authorizerFunc adapts a function to Authorizer.
type authorizerFunc func(ctx context.Context, token string, in engine.Input) (engine.Result, error)

func (f authorizerFunc) Authorize(ctx context.Context, token string, in engine.Input) (engine.Result, error) {
	return f(ctx, token, in)
}
