package authz_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/reason"
)

// TestClientFailOpenNotice: a fail-open client says so once when it is
// made (what it means and how to change it); a fail-closed one does not,
// and calls do not repeat the notice.
func TestClientFailOpenNotice(t *testing.T) {
	for _, mode := range []string{authz.FailOpen, authz.FailClosed} {
		t.Run(mode, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, nil))
			c, err := authz.NewClient(serveGRPC(t, newServer(t, newEngine(t, nil, nil))), authz.ClientOptions{
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
	authz.Decider
	delay time.Duration
}

func (s slowDecider) ValidateToken(ctx context.Context, token string) engine.TokenDecision {
	time.Sleep(s.delay)
	return s.Decider.ValidateToken(ctx, token)
}

func (s slowDecider) Authorize(ctx context.Context, token string, in engine.Input) (engine.Result, error) {
	time.Sleep(s.delay)
	return s.Decider.Authorize(ctx, token, in)
}

// TestClientSlowSidecarWithinTimeout: a sidecar that accepts at once and
// answers a little before the configured timeout is not unreachable;
// one that answers a little after it is, and the fail mode applies.
func TestClientSlowSidecarWithinTimeout(t *testing.T) {
	const timeout, margin = 2 * time.Second, 600 * time.Millisecond
	eng := newEngine(t, nil, nil)
	targets := map[string]func(authz.Decider) string{
		"grpc": func(d authz.Decider) string { return serveGRPC(t, newServer(t, d)) },
		"http": func(d authz.Decider) string {
			mux := http.NewServeMux()
			newServer(t, d).RegisterHTTP(mux)
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
					c, err := authz.NewClient(addr, authz.ClientOptions{FailMode: mode, Timeout: timeout, Logger: quietLogger()})
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
