package server_test

import (
	"flag"
	"log/slog"
	"testing"

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
