package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxClientBinary bounds the binary of an application that only calls the
// sidecar (examples/sidecar-client, built with default flags: symbols and
// DWARF kept). It measured 36 MiB when the client linked the engine, and
// 18.4 MiB without it (go1.26, linux/amd64).
const maxClientBinary = 20 << 20

// heavy are the import path prefixes a client of the sidecar must not
// link: the policy engine (OPA), the JWT library, the Redis client and
// svc's own engine.
var heavy = []string{
	"github.com/open-policy-agent/",
	"github.com/lestrrat-go/",
	"github.com/redis/",
	"github.com/svc-dev/svc/engine",
}

// TestClientFootprint: the Go client and its net/http middleware (package
// authz) link neither the engine nor its dependencies, and an application
// using them stays small.
func TestClientFootprint(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./sidecar-client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	for _, p := range deps {
		for _, h := range heavy {
			if strings.HasPrefix(p, h) {
				t.Errorf("examples/sidecar-client links %s", p)
			}
		}
	}
	t.Logf("examples/sidecar-client links %d packages", len(deps))
	if testing.Short() {
		return
	}
	bin := filepath.Join(t.TempDir(), "sidecar-client")
	if out, err := exec.Command("go", "build", "-o", bin, "./sidecar-client").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("examples/sidecar-client binary: %d bytes (%.1f MiB)", fi.Size(), float64(fi.Size())/(1<<20))
	if fi.Size() > maxClientBinary {
		t.Errorf("examples/sidecar-client is %.1f MiB, more than %d MiB", float64(fi.Size())/(1<<20), maxClientBinary>>20)
	}
}
