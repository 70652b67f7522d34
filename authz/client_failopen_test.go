package authz_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/internal/testkit/servertest"
	"github.com/svc-dev/svc/reason"
)

// TestClientFailOpenNotice: a fail-open client says so once when it is
// made (what it means and how to change it); a fail-closed one does not,
// and calls do not repeat the notice.
func TestClientFailOpenNotice(t *testing.T) {
	for _, mode := range []string{authz.FailOpen, authz.FailClosed} {
		t.Run(mode, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			c, err := authz.NewClient(servertest.ServeGRPC(t, servertest.NewServer(t, servertest.NewEngine(t, nil, nil))), authz.ClientOptions{
				FailMode: mode, Logger: log, Timeout: 30 * time.Second, ConfigFile: "-", LookupEnv: noEnv})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for range 3 {
				if _, err := c.ValidateToken(t.Context(), "not-a-token"); err != nil {
					t.Fatal(err)
				}
			}
			lines := strings.Count(buf.String(), "requests are allowed when the sidecar is unreachable")
			if mode == authz.FailClosed {
				if lines != 0 {
					t.Errorf("a fail-closed client logged the fail-open notice:\n%s", buf.String())
				}
				return
			}
			if lines != 1 || !strings.Contains(buf.String(), "SVC_FAIL_MODE=closed") || !strings.Contains(buf.String(), "level=WARN") {
				t.Errorf("want one warning naming SVC_FAIL_MODE=closed, got:\n%s", buf.String())
			}
		})
	}
}

// slowDecider answers after delay, as a loaded sidecar would.
type slowDecider struct {
	server.Decider
	delay time.Duration
}

func (s slowDecider) Decide(ctx context.Context, req engine.Request) (engine.Result, error) {
	time.Sleep(s.delay)
	return s.Decider.Decide(ctx, req)
}

// TestClientSlowSidecarWithinTimeout: a sidecar that accepts at once and
// answers a little before the configured timeout is not unreachable;
// one that answers a little after it is, and the fail mode applies.
func TestClientSlowSidecarWithinTimeout(t *testing.T) {
	const timeout, margin = 2 * time.Second, 600 * time.Millisecond
	eng := servertest.NewEngine(t, nil, nil)
	targets := map[string]func(server.Decider) string{
		"grpc": func(d server.Decider) string { return servertest.ServeGRPC(t, servertest.NewServer(t, d)) },
		"http": func(d server.Decider) string {
			mux := http.NewServeMux()
			servertest.NewServer(t, d).RegisterHTTP(mux)
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			return srv.URL
		},
	}
	for name, serve := range targets {
		for _, tc := range []struct {
			name    string
			delay   time.Duration
			unreach bool
		}{
			{"answers before the timeout", timeout - margin, false},
			{"answers after the timeout", timeout + margin, true},
		} {
			for _, mode := range []string{authz.FailOpen, authz.FailClosed} {
				t.Run(name+"/"+tc.name+"/"+mode, func(t *testing.T) {
					t.Parallel()
					addr := serve(slowDecider{Decider: eng, delay: tc.delay})
					c, err := authz.NewClient(addr, authz.ClientOptions{FailMode: mode, Timeout: timeout, Logger: servertest.QuietLogger()})
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					start := time.Now()
					td, err := c.ValidateToken(t.Context(), "not-a-token")
					took := time.Since(start)
					if !tc.unreach {
						if err != nil || td.Reason != reason.DevAnonymous {
							t.Errorf("after %v: %+v, %v; want the sidecar's decision (dev-anonymous)", took, td, err)
						}
						return
					}
					if took < timeout {
						t.Errorf("declared unreachable after %v, before the %v timeout", took, timeout)
					}
					if mode == authz.FailOpen {
						if err != nil || !td.Allowed || td.Reason != reason.FailOpen {
							t.Errorf("fail-open: %+v, %v; want allowed by fail-open", td, err)
						}
					} else if !errors.Is(err, authz.ErrUnavailable) || td.Allowed {
						t.Errorf("fail-closed: %+v, %v; want ErrUnavailable", td, err)
					}
				})
			}
		}
	}
}

// fullBacklog is a TCP listener whose accept queue is full: connecting to
// it hangs, as with a sidecar too busy to accept.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 3 {
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		if c, err := d.Dial("tcp", addr); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	return addr
}

// TestClientConnectWithinTimeout: a connection that is not accepted is
// unreachable once the client's whole timeout has passed, not after a
// shorter connect timeout of the transport (gRPC's is 20 s).
func TestClientConnectWithinTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 21 s")
	}
	const timeout = 21 * time.Second
	addr := fullBacklog(t)
	for _, target := range []string{addr, "http://" + addr} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			c, err := authz.NewClient(target, authz.ClientOptions{FailMode: authz.FailClosed, Timeout: timeout, Logger: servertest.QuietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			_, err = c.ValidateToken(t.Context(), "t")
			if took := time.Since(start); took < timeout {
				t.Errorf("unreachable after %v, before the %v timeout: %v", took, timeout, err)
			}
			if !errors.Is(err, authz.ErrUnavailable) {
				t.Errorf("err = %v, want ErrUnavailable", err)
			}
		})
	}
}
