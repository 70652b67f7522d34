package authz_test

import (
	"flag"
	"testing"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/internal/testkit/servertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// tenant is the one tenant of servertest's users.
const tenant = servertest.Tenant

// newClient returns a client of the sidecar at addr. Its timeout is far
// above what a decision takes, even under the race detector on a loaded
// machine: tests of the timeout itself set a short one of their own.
func newClient(t testing.TB, addr, mode string) *authz.Client {
	t.Helper()
	c, err := authz.NewClient(addr, authz.ClientOptions{FailMode: mode, Timeout: 30 * time.Second, Logger: servertest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
