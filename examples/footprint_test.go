package examples

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// maxClientBinary bounds the binary of an application that only calls the
// sidecar (examples/sidecar-client, built with default flags: symbols and
// DWARF kept). It measured 36 MiB when the client linked the engine, and
// 18.4 MiB without it (go1.26, linux/amd64).
const maxClientBinary = 20 << 20

// TestClientFootprint: an application using the Go client and its
// net/http middleware (package authz) stays small. What it may link is a
// row of the dependency rules (internal/layers).
func TestClientFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/sidecar-client")
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
