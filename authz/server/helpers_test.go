package server_test

import (
	"flag"

	"github.com/svc-dev/svc/internal/testkit/servertest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// tenant is the one tenant of servertest's users.
const tenant = servertest.Tenant
