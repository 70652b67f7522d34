package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildMu  sync.Mutex
	binDir   string
	built    = map[string]string{}
	buildErr = map[string]string{}
)

// BuildTags are the build tags of the binaries, as `make build` sets them:
// vtprotobuf compiles go-control-plane's generated marshaling, which the
// sidecar's gRPC codec uses.
const BuildTags = "vtprotobuf"

// Binary builds ./cmd/<name> from the module root, once per test run, and
// returns the path of the executable. A build failure fails every test
// that needs the binary, with the compiler's output.
func Binary(t testing.TB, name string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[name]; ok {
		return p
	}
	if msg, ok := buildErr[name]; ok {
		t.Fatalf("build ./cmd/%s failed:\n%s", name, msg)
	}
	root := ModuleRoot(t)
	if binDir == "" {
		d, err := os.MkdirTemp("", "svc-e2e-bin-")
		if err != nil {
			t.Fatalf("build dir: %v", err)
		}
		binDir = d
	}
	cmd := exec.Command(goTool(), "build", "-tags", BuildTags, "-o", binDir+string(filepath.Separator), "./cmd/"+name)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		buildErr[name] = string(out) + err.Error()
		t.Fatalf("build ./cmd/%s failed:\n%s", name, buildErr[name])
	}
	p := filepath.Join(binDir, name)
	built[name] = p
	return p
}

// Cleanup removes the binaries built during the run. TestMain calls it
// after the tests.
func Cleanup() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
		binDir = ""
		built = map[string]string{}
	}
}

// goTool returns the go command: the one of the toolchain running the
// tests (go test puts its GOROOT/bin first on PATH), else "go".
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
