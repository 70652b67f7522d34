package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

var (
	buildMu  sync.Mutex
	binDir   string
	built    = map[string]string{}
	buildErr = map[string]string{}
	// builtAll is set once the first Binary call tried Commands at once.
	builtAll bool
)

// Commands are the commands e2e tests run. The first Binary call for one
// of them builds them all in one go build, which compiles their shared
// packages once and links them in parallel.
var Commands = []string{"svc-sidecar", "core", "svc-demo"}

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
	if !builtAll && slices.Contains(Commands, name) {
		builtAll = true
		if buildCommands(root, Commands...) == nil {
			for _, c := range Commands {
				built[c] = filepath.Join(binDir, c)
			}
			return built[name]
		}
		// One of them does not build: each is built on its own below,
		// so that only the tests needing it fail, with its own output.
	}
	out, err := buildCommandsOutput(root, name)
	if err != nil {
		buildErr[name] = string(out) + err.Error()
		t.Fatalf("build ./cmd/%s failed:\n%s", name, buildErr[name])
	}
	p := filepath.Join(binDir, name)
	built[name] = p
	return p
}

// buildCommands builds ./cmd/<name> of each name into binDir.
func buildCommands(root string, names ...string) error {
	_, err := buildCommandsOutput(root, names...)
	return err
}

func buildCommandsOutput(root string, names ...string) ([]byte, error) {
	args := []string{"build", "-tags", BuildTags, "-o", binDir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = root
	return cmd.CombinedOutput()
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
		builtAll = false
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

// DevIssuerDir is the directory of the development issuer's key pair
// (core dev token) that the sidecars a test starts use: one per test run,
// beside the binaries, so that its key is made once and the user's own
// (~/.config/svc/dev-issuer) is never touched.
func DevIssuerDir(t testing.TB) string {
	t.Helper()
	Binary(t, "svc-sidecar") // makes binDir
	buildMu.Lock()
	defer buildMu.Unlock()
	return filepath.Join(binDir, "dev-issuer")
}
