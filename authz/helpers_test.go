package authz_test

import (
	"flag"
	"log/slog"
	"testing"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/authz/server/servertest"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The helpers shared with the other side's tests (servertest), under
// this package's names.
const tenant = servertest.Tenant

type idp = servertest.IDP

func newIDP(t testing.TB) *idp                                { return servertest.NewIDP(t) }
func user(sub string, roles ...string) map[string]any         { return servertest.User(sub, roles...) }
func quietLogger() *slog.Logger                               { return servertest.QuietLogger() }
func newServer(t testing.TB, d server.Decider) *server.Server { return servertest.NewServer(t, d) }
func serveGRPC(t testing.TB, s *server.Server) string         { return servertest.ServeGRPC(t, s) }
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	servertest.Golden(t, *update, name, got)
}

func newEngine(t testing.TB, p *idp, mutate func(*config.Config)) *engine.Engine {
	t.Helper()
	return servertest.NewEngine(t, p, mutate)
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

type httpReply = servertest.Reply

func post(t *testing.T, method, url, body string, header map[string]string) httpReply {
	t.Helper()
	return servertest.Post(t, method, url, body, header)
}

func serveHTTP(t *testing.T, s *server.Server) string { t.Helper(); return servertest.ServeHTTP(t, s) }

func fixedUser(sub string, roles ...string) map[string]any {
	return servertest.FixedUser(sub, roles...)
}

const (
	fixedIat = servertest.FixedIat
	fixedExp = servertest.FixedExp
)
