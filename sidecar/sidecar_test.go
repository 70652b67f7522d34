package sidecar

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// testTenant is the deployment tenant of the tests' sidecars.
const testTenant = "acme"

// waitTimeout bounds every wait for a state the sidecar must reach.
const waitTimeout = 10 * time.Second

// testIdP is the loopback identity provider, serving its JWKS over plain
// HTTP, as the engine accepts for a loopback host.
type testIdP struct{ *idptest.IdP }

func newTestIdP(t testing.TB) *testIdP { return &testIdP{idptest.New(t)} }

// token signs an RS256 token for sub in tenant with roles, valid for ten
// minutes, with a jti of its own.
func (p *testIdP) token(t testing.TB, sub, tenant string, roles ...string) string {
	t.Helper()
	c := idptest.Claims(sub, tenant, roles...)
	c["jti"] = sub + "-" + rand.Text()
	c["exp"] = time.Now().Add(10 * time.Minute).Unix()
	return p.Token(t, c)
}

// testConfig is a fail-closed deployment of testTenant verifying tokens
// of p, listening on free loopback ports.
func testConfig(p *testIdP) config.Config {
	var cfg config.Config
	cfg.SDK.SidecarAddr = "127.0.0.1:0"
	cfg.SDK.TenantID = testTenant
	cfg.SDK.FailMode = config.FailClosed
	cfg.SDK.JWKSURL = p.JWKSURL()
	cfg.Sidecar.HTTPAddr = "127.0.0.1:0"
	cfg.Sidecar.DrainTimeout = config.Duration{Duration: waitTimeout}
	cfg.Audit.Destination = config.AuditOff
	cfg.Tenants = map[string]config.Tenant{testTenant: {Plan: "team"}}
	return cfg
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newTestEngine(t testing.TB, cfg config.Config) *engine.Engine {
	t.Helper()
	e, err := engine.New(cfg, engine.Deps{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// running is a Server whose Serve runs in the background.
type running struct {
	*Server
	cancel context.CancelFunc
	done   chan error
}

// startServer builds a Server on deps and serves it until the test ends,
// when Serve must return nil.
func startServer(t testing.TB, deps Deps) *running {
	t.Helper()
	if deps.Logger == nil {
		deps.Logger = quietLogger()
	}
	s, err := New(deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Server: s, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
			r.done <- err
		case <-time.After(2 * waitTimeout):
			t.Errorf("Serve did not return %s after its context ended", 2*waitTimeout)
		}
	})
	return r
}

// startSidecar runs a sidecar on a real engine built from cfg and waits
// until it reports ready.
func startSidecar(t testing.TB, cfg config.Config) *running {
	t.Helper()
	r := startServer(t, Deps{Engine: newTestEngine(t, cfg)})
	testkit.Eventually(t, "GET /readyz answers 200", func() bool {
		status, _ := get(t, r, PathReadyz)
		return status == http.StatusOK
	})
	return r
}

// stop ends Serve and returns its error, failing the test when it does
// not return in time.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(2 * waitTimeout):
		t.Fatalf("Serve did not return %s after its context ended", 2*waitTimeout)
		return nil
	}
}

var httpClient = &http.Client{Timeout: waitTimeout}

// get performs GET path on the sidecar's HTTP listener.
func get(t testing.TB, r *running, path string) (int, []byte) {
	t.Helper()
	resp, err := httpClient.Get("http://" + r.HTTPAddr().String() + path)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", path, err)
	}
	return resp.StatusCode, body
}

func dial(t testing.TB, addr net.Addr) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc client: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// checkRequest is an ext_authz request as Envoy sends it for an HTTP
// request with the given bearer token ("" for none).
func checkRequest(token, method, path string) *authv3.CheckRequest {
	h := map[string]string{":method": method, ":path": path, ":authority": "shop.example", "user-agent": "sidecar-test"}
	if token != "" {
		h["authorization"] = "Bearer " + token
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: method, Path: path, Host: "shop.example", Scheme: "https", Protocol: "HTTP/1.1", Headers: h,
		}},
	}}
}

// allowed asks the sidecar over gRPC whether token may GET path.
func allowed(t testing.TB, conn *grpc.ClientConn, token, path string) bool {
	t.Helper()
	return allowedMethod(t, conn, token, http.MethodGet, path)
}

// allowedMethod asks the sidecar over gRPC whether token may send method
// to path.
func allowedMethod(t testing.TB, conn *grpc.ClientConn, token, method, path string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	resp, err := authv3.NewAuthorizationClient(conn).Check(ctx, checkRequest(token, method, path))
	if err != nil {
		t.Fatalf("Check %s %s: %v", method, path, err)
	}
	return code.Code(resp.GetStatus().GetCode()) == code.Code_OK
}

func TestNewRequiresEngine(t *testing.T) {
	if _, err := New(Deps{}); err == nil {
		t.Fatal("New without an engine: no error")
	}
}

// TestNewAddressInUse checks that a port in use is an error of New that
// names the address and the configuration key, and that the listener
// already bound is released.
func TestNewAddressInUse(t *testing.T) {
	cfg := testConfig(newTestIdP(t))
	tests := []struct {
		name    string
		key     string
		occupy  func(cfg *config.Config, busy string)
		release func(cfg config.Config) string // the other address, bound by New first
	}{
		{
			name:   "grpc",
			key:    "sdk.sidecar_addr",
			occupy: func(cfg *config.Config, busy string) { cfg.SDK.SidecarAddr = busy },
		},
		{
			name:    "http",
			key:     "sidecar.http_addr",
			occupy:  func(cfg *config.Config, busy string) { cfg.Sidecar.HTTPAddr = busy },
			release: func(cfg config.Config) string { return cfg.SDK.SidecarAddr },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			cfg := cfg
			cfg.SDK.SidecarAddr = freeAddr(t)
			tc.occupy(&cfg, busy.Addr().String())
			_, err = New(Deps{Engine: newTestEngine(t, cfg), Logger: quietLogger()})
			if err == nil {
				t.Fatalf("New with %s = %s in use: no error", tc.key, busy.Addr())
			}
			for _, want := range []string{busy.Addr().String(), tc.key, "address already in use"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("New error %q does not mention %q", err, want)
				}
			}
			if tc.release != nil {
				l, err := net.Listen("tcp", tc.release(cfg))
				if err != nil {
					t.Fatalf("the listener New bound before failing was not released: %v", err)
				}
				l.Close()
			}
		})
	}
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestServeLifecycle serves, decides, and shuts down: readiness and gRPC
// health go from serving to not serving, and Serve returns nil.
func TestServeLifecycle(t *testing.T) {
	idp := newTestIdP(t)
	r := startSidecar(t, testConfig(idp))
	conn := dial(t, r.GRPCAddr())
	health := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	if hr, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Check while serving = %v, %v; want SERVING", hr.GetStatus(), err)
	}
	if !allowed(t, conn, idp.token(t, "alice", testTenant, "viewer"), "/orders/42") {
		t.Error("a viewer of the deployment's tenant may not read an order")
	}
	if allowed(t, conn, idp.token(t, "mallory", "other-tenant", "admin"), "/orders/42") {
		t.Error("a token of another tenant was allowed")
	}

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch, err := health.Watch(watchCtx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health Watch: %v", err)
	}
	if hr, err := watch.Recv(); err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first health Watch update = %v, %v; want SERVING", hr.GetStatus(), err)
	}

	r.cancel()
	if hr, err := watch.Recv(); err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health Watch update after shutdown began = %v, %v; want NOT_SERVING", hr.GetStatus(), err)
	}
	if r.isReady() {
		t.Error("ready while draining")
	}
	// The open watch is the one stream the graceful stop waits for.
	stopWatch()
	if err := r.stop(t); err != nil {
		t.Fatalf("Serve after cancel = %v, want nil", err)
	}

	fresh := dial(t, r.GRPCAddr())
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := healthpb.NewHealthClient(fresh).Check(short, &healthpb.HealthCheckRequest{}); err == nil {
		t.Error("gRPC health answered after Serve returned")
	}
	if status, body := get(t, r, PathHealthz); status != 0 {
		t.Errorf("HTTP answered %d %s after Serve returned", status, body)
	}
}

// TestDrain checks the HTTP side of the shutdown: a request in flight
// when shutdown begins keeps running while readiness reports draining,
// and completes; one still running at the drain timeout is cut.
// inFlight starts a request that stays in flight as long as the test
// wants: a raw connection sends the headers and half the body of a
// validate-token call. The caller sends rest to finish it.
func inFlight(t *testing.T, r *running, idp *testIdP) (c net.Conn, rest string) {
	t.Helper()
	body := `{"token":"` + idp.token(t, "alice", testTenant, "viewer") + `"}`
	half := len(body) / 2
	c, err := net.DialTimeout("tcp", r.HTTPAddr().String(), waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /v1/validate-token HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:half])
	testkit.Eventually(t, "the request is in flight", func() bool { return r.inflight.Load() == 1 })
	return c, body[half:]
}

func TestDrain(t *testing.T) {
	idp := newTestIdP(t)
	tests := []struct {
		name   string
		drain  time.Duration
		finish bool // the client sends the rest of its body during the drain
	}{
		{name: "in-flight request completes", drain: waitTimeout, finish: true},
		{name: "request cut at the drain timeout", drain: time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(idp)
			cfg.Sidecar.DrainTimeout = config.Duration{Duration: tc.drain}
			r := startSidecar(t, cfg)
			c, rest := inFlight(t, r, idp)

			began := time.Now()
			r.cancel()
			testkit.Eventually(t, "readiness reports draining", func() bool { return !r.isReady() })
			rec := httptest.NewRecorder()
			r.http.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathReadyz, nil))
			if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"draining"`) {
				t.Errorf("GET /readyz while draining = %d %s, want 503 with reason draining", rec.Code, rec.Body)
			}
			if st := r.status(); st.Status != "draining" || st.Ready {
				t.Errorf("status while draining = %q ready=%v, want draining and not ready", st.Status, st.Ready)
			}
			if tc.finish {
				select {
				case err := <-r.done:
					t.Fatalf("Serve returned (%v) while a request was in flight", err)
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := io.WriteString(c, rest); err != nil {
					t.Fatalf("send the rest of the body: %v", err)
				}
			}
			_ = c.SetReadDeadline(time.Now().Add(2 * waitTimeout))
			resp, rerr := http.ReadResponse(bufio.NewReader(c), nil)
			serveErr := r.stop(t)
			elapsed := time.Since(began)
			if serveErr != nil {
				t.Fatalf("Serve = %v, want nil", serveErr)
			}

			if tc.finish {
				if rerr != nil {
					t.Fatalf("in-flight request failed during the drain: %v", rerr)
				}
				defer resp.Body.Close()
				got, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"allowed":true`) {
					t.Errorf("in-flight request = %d %s, want 200 allowed", resp.StatusCode, got)
				}
				return
			}
			if rerr == nil {
				resp.Body.Close()
				t.Errorf("request still running at the drain timeout got an answer: %d", resp.StatusCode)
			} else if errors.Is(rerr, io.ErrUnexpectedEOF) || errors.Is(rerr, io.EOF) || isConnReset(rerr) {
				t.Logf("request cut as expected: %v", rerr)
			} else {
				t.Errorf("request still running at the drain timeout: %v, want the connection closed", rerr)
			}
			if elapsed < tc.drain || elapsed > tc.drain+waitTimeout {
				t.Errorf("shutdown took %s, want the drain timeout %s (plus a little)", elapsed, tc.drain)
			}
		})
	}
}

func isConnReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}
