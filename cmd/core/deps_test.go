package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDepsLeaveOutDaemon: core reads the sidecar's answers through the
// wire package wire, so that its contract with the sidecar is
// one small package rather than the daemon's internals. None of the
// sidecar's packages may come back into its build.
func TestDepsLeaveOutDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go list needs the go command: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !contains(deps, "github.com/svc-dev/svc/wire") {
		t.Fatalf("go list -deps gave %d packages without wire: %s", len(deps), out)
	}
	const daemon = "github.com/svc-dev/svc/sidecar"
	for _, p := range deps {
		if p == daemon || strings.HasPrefix(p, daemon+"/") {
			t.Errorf("core links %s: read the sidecar's answers through wire", p)
		}
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
