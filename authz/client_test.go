package authz_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/servertest"
	"github.com/svc-dev/svc/reason"
)

func TestClientAgainstRunningSidecar(t *testing.T) {
	p := servertest.NewIDP(t)
	srv := servertest.NewServer(t, servertest.NewEngine(t, p, nil))
	conflictSrv := servertest.NewServer(t, servertest.NewEngine(t, p, func(c *config.Config) { c.Policy.Dir = "testdata/policy-conflict" }))
	// The same calls over gRPC and over the local HTTP API give the same
	// decisions and the same errors.
	targets := []struct{ name, addr, conflict string }{
		{"grpc", servertest.ServeGRPC(t, srv), servertest.ServeGRPC(t, conflictSrv)},
		{"http", servertest.ServeHTTP(t, srv), servertest.ServeHTTP(t, conflictSrv)},
	}
	viewer := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	expired := p.TokenFor(t, map[string]any{"sub": "alice", "tenant_id": tenant, "exp": time.Now().Add(-time.Hour).Unix(), "iat": servertest.FixedIat})

	for _, target := range targets {
		for _, mode := range []string{authz.FailOpen, authz.FailClosed} {
			t.Run(target.name+"/"+mode, func(t *testing.T) {
				c := newClient(t, target.addr, mode)
				cc := newClient(t, target.conflict, mode)

				t.Run("valid token", func(t *testing.T) {
					got, err := c.ValidateToken(t.Context(), viewer)
					if err != nil {
						t.Fatal(err)
					}
					want := authz.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "alice", TenantID: tenant, Claims: map[string]any{
						"sub": "alice", "tenant_id": tenant, "roles": []any{"viewer"}, "email": "alice@example.com",
						"department": "sales", "clearance": map[string]any{"level": 3.0, "tags": []any{"a", "b"}},
						"exp": float64(servertest.FixedExp), "iat": float64(servertest.FixedIat),
					}}
					if got.DecisionID == "" {
						t.Error("the answer has no decision id")
					}
					if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(authz.TokenDecision{}, "DecisionID")); diff != "" {
						t.Errorf("decision (-want +got):\n%s", diff)
					}
				})

				tokenCases := []struct {
					name, token string
					want        reason.Code
				}{
					{"expired token", expired, reason.TokenExpired},
					{"garbage token", "garbage", reason.TokenMalformed},
					{"no token", "", reason.TokenMissing},
				}
				for _, tc := range tokenCases {
					t.Run(tc.name+" is a decision in either mode", func(t *testing.T) {
						got, err := c.ValidateToken(t.Context(), tc.token)
						if err != nil {
							t.Fatal(err)
						}
						if got.Allowed || got.Reason != tc.want || got.Claims != nil {
							t.Errorf("got %+v, want denied with %q and no claims", got, tc.want)
						}
					})
				}

				authzCases := []struct {
					name    string
					req     authz.AuthorizeRequest
					allowed bool
					reason  reason.Code
					deny    []string
				}{
					{"allowed", authz.AuthorizeRequest{Token: viewer, Action: "orders:read", Resource: authz.Resource{ID: "o-1"}}, true, reason.PolicyAllow, []string{}},
					{"denied", authz.AuthorizeRequest{Token: viewer, Action: "orders:update"}, false, reason.PolicyDeny, []string{"role-forbidden: viewer cannot orders:update"}},
					{"expired token", authz.AuthorizeRequest{Token: expired, Action: "orders:read"}, false, reason.TokenExpired, []string{}},
				}
				for _, tc := range authzCases {
					t.Run("authorize "+tc.name, func(t *testing.T) {
						got, err := c.Authorize(t.Context(), tc.req)
						if err != nil {
							t.Fatal(err)
						}
						if got.Allowed != tc.allowed || got.Reason != tc.reason || !cmp.Equal(got.DenyReasons, tc.deny) {
							t.Errorf("got %+v, want allowed=%v reason=%q deny=%q", got, tc.allowed, tc.reason, tc.deny)
						}
						if got.DecisionID == "" {
							t.Error("no decision id: every decision has one, a rejected token's too")
						}
					})
				}

				t.Run("malformed request is an error in either mode", func(t *testing.T) {
					_, err := c.Authorize(t.Context(), authz.AuthorizeRequest{Token: viewer})
					if !errors.Is(err, &reason.Error{Code: reason.InputInvalid}) || errors.Is(err, authz.ErrUnavailable) {
						t.Fatalf("err %v, want input-invalid", err)
					}
				})

				t.Run("engine cannot decide", func(t *testing.T) {
					// The sidecar answered: a denial in both fail modes,
					// never a fail-open pass.
					got, err := cc.Authorize(t.Context(), authz.AuthorizeRequest{Token: viewer, Action: "orders:read", Resource: authz.Resource{ID: "conflict"}})
					checkUnavailable(t, authz.FailClosed, got, err, reason.PolicyError)
				})
			})
		}
	}
}

// checkUnavailable checks the outcome of an Authorize that got no decision.
func checkUnavailable(t *testing.T, mode string, got authz.Decision, err error, want reason.Code) {
	t.Helper()
	if mode == authz.FailOpen {
		if err != nil || !got.Allowed || got.Reason != reason.FailOpen || got.Claims != nil || got.Subject != "anonymous" {
			t.Fatalf("fail-open: got %+v, %v", got, err)
		}
		return
	}
	var ue *authz.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, authz.ErrUnavailable) || ue.Reason != want || got.Allowed {
		t.Fatalf("fail-closed: got %+v, err %v; want *UnavailableError with %q", got, err, want)
	}
}

func TestClientSidecarUnreachable(t *testing.T) {
	targets := []struct {
		name string
		addr func(testing.TB) string
		want reason.Code
	}{
		{"connection refused", testkit.DeadAddr, reason.Unavailable},
		{"sidecar hangs", testkit.BlackHole, reason.Unavailable},
		{"http/connection refused", func(t testing.TB) string { return "http://" + testkit.DeadAddr(t) }, reason.Unavailable},
		{"http/sidecar hangs", func(t testing.TB) string { return "http://" + testkit.BlackHole(t) }, reason.Unavailable},
	}
	for _, target := range targets {
		for _, mode := range []string{authz.FailOpen, authz.FailClosed} {
			t.Run(target.name+"/"+mode, func(t *testing.T) {
				c, err := authz.NewClient(target.addr(t), authz.ClientOptions{FailMode: mode, Timeout: 200 * time.Millisecond, Logger: servertest.QuietLogger()})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()

				start := time.Now()
				td, err := c.ValidateToken(t.Context(), "any-token")
				if took := time.Since(start); took > 2*time.Second {
					t.Errorf("ValidateToken took %v with a 200ms timeout", took)
				}
				if mode == authz.FailOpen {
					want := authz.TokenDecision{Allowed: true, Claims: nil, Reason: reason.FailOpen}
					if err != nil || td.Allowed != want.Allowed || td.Claims != nil || td.Reason != want.Reason {
						t.Errorf("ValidateToken = %+v, %v; want %+v", td, err, want)
					}
				} else {
					var ue *authz.UnavailableError
					if !errors.As(err, &ue) || !errors.Is(err, authz.ErrUnavailable) || ue.Reason != target.want || ue.Op != "validate-token" || td.Allowed {
						t.Errorf("ValidateToken = %+v, %v; want *UnavailableError", td, err)
					}
				}
				d, err := c.Authorize(t.Context(), authz.AuthorizeRequest{Token: "any-token", Action: "orders:read"})
				checkUnavailable(t, mode, d, err, target.want)
			})
		}
	}
}

func TestClientCallerContext(t *testing.T) {
	c := newClient(t, testkit.BlackHole(t), authz.FailOpen)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	d, err := c.ValidateToken(ctx, "any-token")
	if err == nil || !errors.Is(err, context.Canceled) || d.Allowed {
		t.Fatalf("cancelled caller: %+v, %v; want context.Canceled, not fail-open", d, err)
	}
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

func TestClientReusesOneConnection(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &countingListener{Listener: raw}
	g := grpc.NewServer()
	servertest.NewServer(t, servertest.NewEngine(t, nil, nil)).Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)

	c := newClient(t, raw.Addr().String(), authz.FailClosed)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if d, err := c.ValidateToken(t.Context(), "dev-token"); err != nil || d.Reason != reason.DevAnonymous {
				t.Errorf("ValidateToken = %+v, %v", d, err)
			}
		}()
	}
	wg.Wait()
	if n := lis.n.Load(); n != 1 {
		t.Errorf("%d connections for 50 calls, want 1", n)
	}
}

func TestClientReconnects(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	srv := servertest.NewServer(t, servertest.NewEngine(t, nil, nil))
	serve := func(lis net.Listener) *grpc.Server {
		g := grpc.NewServer()
		srv.Register(g)
		go func() { _ = g.Serve(lis) }()
		return g
	}
	g := serve(lis)
	c := newClient(t, addr, authz.FailClosed)
	if _, err := c.ValidateToken(t.Context(), "t"); err != nil {
		t.Fatalf("first call: %v", err)
	}
	g.Stop()
	if _, err := c.ValidateToken(t.Context(), "t"); !errors.Is(err, authz.ErrUnavailable) {
		t.Fatalf("sidecar stopped: err %v, want ErrUnavailable", err)
	}
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	g = serve(lis)
	defer g.Stop()
	// The client redials with a growing backoff (about 1s, 1.6s, 2.6s...).
	testkit.Poll(t, 30*time.Second, "a decision after the sidecar came back", func() (bool, string) {
		d, err := c.ValidateToken(t.Context(), "t")
		return err == nil && d.Reason == reason.DevAnonymous, fmt.Sprintf("%+v, %v", d, err)
	})
}

func TestClientTLS(t *testing.T) {
	ca := testkit.NewCA(t, "svc-sidecar test")
	cert := ca.Server(t).KeyPair(t)
	srv := servertest.NewServer(t, servertest.NewEngine(t, nil, nil))
	addr := testkit.ServeGRPC(t, func(g *grpc.Server) { srv.Register(g) }, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))

	secure, err := authz.NewClient(addr, authz.ClientOptions{FailMode: authz.FailClosed, TLS: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS13}})
	if err != nil {
		t.Fatal(err)
	}
	defer secure.Close()
	if d, err := secure.ValidateToken(t.Context(), "t"); err != nil || d.Reason != reason.DevAnonymous {
		t.Errorf("over TLS: %+v, %v", d, err)
	}

	plain := newClient(t, addr, authz.FailClosed)
	if _, err := plain.ValidateToken(t.Context(), "t"); !errors.Is(err, authz.ErrUnavailable) {
		t.Errorf("plaintext client to a TLS sidecar: err %v, want ErrUnavailable", err)
	}
}

func TestNewClientOptions(t *testing.T) {
	tests := []struct {
		name    string
		addr    string
		opts    authz.ClientOptions
		wantErr bool
		mode    string
	}{
		{name: "defaults", opts: authz.ClientOptions{}, mode: authz.FailOpen},
		{name: "closed", addr: "localhost:50051", opts: authz.ClientOptions{FailMode: "closed"}, mode: authz.FailClosed},
		{name: "unknown fail mode", opts: authz.ClientOptions{FailMode: "maybe"}, wantErr: true},
		{name: "negative timeout", opts: authz.ClientOptions{Timeout: -time.Second}, wantErr: true},
		{name: "unparsable target", addr: "dns://a b/%zz", wantErr: true},
		{name: "URL of the HTTP API", addr: "http://localhost:7700", mode: authz.FailOpen},
		{name: "https URL", addr: "https://sidecar.internal:7700/", opts: authz.ClientOptions{FailMode: "closed"}, mode: authz.FailClosed},
		{name: "URL without host", addr: "http://", wantErr: true},
		{name: "URL with a query", addr: "http://localhost:7700/?a=b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.ConfigFile, tt.opts.LookupEnv = "-", noEnv
			c, err := authz.NewClient(tt.addr, tt.opts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			defer c.Close()
			if c.FailMode() != tt.mode {
				t.Errorf("FailMode %q, want %q", c.FailMode(), tt.mode)
			}
		})
	}
}

func noEnv(string) (string, bool) { return "", false }

// TestNewClientDefaults checks where a client finds what the caller left
// unset: SVC_SIDECAR_ADDR and SVC_FAIL_MODE, then the [sdk] table of
// svc.toml, then the defaults.
func TestNewClientDefaults(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "svc.toml")
	testkit.WriteFile(t, file, []byte("[sdk]\nsidecar_addr = \"http://127.0.0.1:7700\"\nfail_mode = \"closed\"\ntenant_id = \"acme\"\n\n[policy]\ndir = \"/etc/svc\"\n"))
	broken := filepath.Join(dir, "broken.toml")
	testkit.WriteFile(t, broken, []byte("[sdk\n"))
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	tests := []struct {
		name       string
		addr       string
		opts       authz.ClientOptions
		wantTarget string
		wantMode   string
		wantErr    string
	}{
		{name: "nothing set", opts: authz.ClientOptions{ConfigFile: filepath.Join(dir, "none.toml"), LookupEnv: noEnv},
			wantTarget: "[::1]:50051", wantMode: authz.FailOpen},
		{name: "svc.toml", opts: authz.ClientOptions{ConfigFile: file, LookupEnv: noEnv},
			wantTarget: "http://127.0.0.1:7700", wantMode: authz.FailClosed},
		{name: "environment over svc.toml", opts: authz.ClientOptions{ConfigFile: file,
			LookupEnv: env(map[string]string{"SVC_SIDECAR_ADDR": "localhost:50051", "SVC_FAIL_MODE": "open"})},
			wantTarget: "localhost:50051", wantMode: authz.FailOpen},
		{name: "arguments over both", addr: "[::1]:6000", opts: authz.ClientOptions{FailMode: "open", ConfigFile: file,
			LookupEnv: env(map[string]string{"SVC_SIDECAR_ADDR": "localhost:50051", "SVC_FAIL_MODE": "closed"})},
			wantTarget: "[::1]:6000", wantMode: authz.FailOpen},
		{name: "no file read with -", opts: authz.ClientOptions{ConfigFile: "-", LookupEnv: noEnv},
			wantTarget: "[::1]:50051", wantMode: authz.FailOpen},
		{name: "broken svc.toml", opts: authz.ClientOptions{ConfigFile: broken, LookupEnv: noEnv}, wantErr: "broken.toml"},
		{name: "bad fail mode in the environment", opts: authz.ClientOptions{ConfigFile: "-",
			LookupEnv: env(map[string]string{"SVC_FAIL_MODE": "sometimes"})}, wantErr: "sometimes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := authz.NewClient(tt.addr, tt.opts)
			if testkit.ExpectErr(t, err, tt.wantErr) {
				return
			}
			defer c.Close()
			if c.Target() != tt.wantTarget || c.FailMode() != tt.wantMode {
				t.Errorf("target %q mode %q, want %q %q", c.Target(), c.FailMode(), tt.wantTarget, tt.wantMode)
			}
		})
	}
}

// TestClientHTTPNotASidecar: a URL that leads elsewhere (404) is a
// configuration error, never an outage the fail mode would let through.
func TestClientHTTPNotASidecar(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	for _, mode := range []string{authz.FailOpen, authz.FailClosed} {
		t.Run(mode, func(t *testing.T) {
			c := newClient(t, srv.URL, mode)
			td, err := c.ValidateToken(t.Context(), "any-token")
			if err == nil || errors.Is(err, authz.ErrUnavailable) || td.Allowed {
				t.Errorf("ValidateToken = %+v, %v; want a non-outage error", td, err)
			}
			d, err := c.Authorize(t.Context(), authz.AuthorizeRequest{Token: "any-token", Action: "orders:read"})
			if err == nil || errors.Is(err, authz.ErrUnavailable) || d.Allowed {
				t.Errorf("Authorize = %+v, %v; want a non-outage error", d, err)
			}
		})
	}
}

// TestLargeIntegerClaimsRoundTrip checks that integer claims beyond 2^53,
// which a double rounds (9007199254740993 would arrive as ...992), reach
// clients exactly, as strings, over both transports and both operations.
func TestLargeIntegerClaimsRoundTrip(t *testing.T) {
	p := servertest.NewIDP(t)
	srv := servertest.NewServer(t, servertest.NewEngine(t, p, nil))
	claims := servertest.FixedUser("alice", "viewer")
	claims["user_num"] = json.Number("9007199254740993")
	claims["neg_num"] = json.Number("-9007199254740993")
	claims["huge_num"] = json.Number("123456789012345678901234567890")
	claims["max_exact"] = json.Number("9007199254740992")
	claims["fraction"] = json.Number("1.5")
	tok := p.TokenFor(t, claims)
	want := map[string]any{
		"user_num": "9007199254740993", "neg_num": "-9007199254740993", "huge_num": "123456789012345678901234567890",
		"max_exact": 9007199254740992.0, "fraction": 1.5,
	}
	for _, target := range []struct{ name, addr string }{{"grpc", servertest.ServeGRPC(t, srv)}, {"http", servertest.ServeHTTP(t, srv)}} {
		t.Run(target.name, func(t *testing.T) {
			c := newClient(t, target.addr, authz.FailClosed)
			td, err := c.ValidateToken(t.Context(), tok)
			if err != nil || !td.Allowed {
				t.Fatalf("ValidateToken = %+v, %v", td, err)
			}
			d, err := c.Authorize(t.Context(), authz.AuthorizeRequest{Token: tok, Action: "orders:read"})
			if err != nil || !d.Allowed {
				t.Fatalf("Authorize = %+v, %v", d, err)
			}
			for k, v := range want {
				if td.Claims[k] != v {
					t.Errorf("ValidateToken claim %s = %#v, want %#v", k, td.Claims[k], v)
				}
				if d.Claims[k] != v {
					t.Errorf("Authorize claim %s = %#v, want %#v", k, d.Claims[k], v)
				}
			}
		})
	}
}
