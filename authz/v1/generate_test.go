package authzv1_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// TestGeneratedCodeIsCurrent regenerates the Go code of authz.proto the
// way scripts/generate.sh does and compares it with the committed files.
// protoc comes from Debian (protobuf-compiler and libprotobuf-dev,
// installed by scripts/install-test-deps.sh); the plugins are built at
// the versions the script pins. Outside CI a missing protoc skips the
// test; under CI it fails it.
func TestGeneratedCodeIsCurrent(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	protoc := testkit.LookPath(t, "protoc", "protobuf-compiler")
	if _, err := os.Stat("/usr/include/google/protobuf/struct.proto"); err != nil {
		testkit.Missing(t, "/usr/include/google/protobuf/struct.proto", "Debian package libprotobuf-dev: apt-get install libprotobuf-dev")
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts", "generate.sh"))
	if err != nil {
		t.Fatal(err)
	}
	version, err := exec.Command(protoc, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := pinned(string(script), "PROTOC_VERSION"); !strings.HasSuffix(strings.TrimSpace(string(version)), " "+want) {
		testkit.Missing(t, "protoc "+want, fmt.Sprintf("found %s; Debian bookworm's protobuf-compiler is %s", bytes.TrimSpace(version), want))
	}
	tools := t.TempDir()
	for _, plugin := range []string{
		"google.golang.org/protobuf/cmd/protoc-gen-go@" + pinned(string(script), "PROTOC_GEN_GO_VERSION"),
		"google.golang.org/grpc/cmd/protoc-gen-go-grpc@" + pinned(string(script), "PROTOC_GEN_GO_GRPC_VERSION"),
	} {
		install := exec.Command("go", "install", plugin)
		install.Env = append(os.Environ(), "GOBIN="+tools)
		if msg, err := install.CombinedOutput(); err != nil {
			// Offline with an empty module cache, the pinned plugin
			// cannot be fetched: the same rule as for a missing program.
			testkit.Missing(t, plugin, fmt.Sprintf("go install %s: %v: %s", plugin, err, bytes.TrimSpace(msg)))
		}
	}

	out := t.TempDir()
	cmd := exec.Command(protoc,
		"-I", root, "-I", "/usr/include",
		"--plugin=protoc-gen-go="+filepath.Join(tools, "protoc-gen-go"),
		"--plugin=protoc-gen-go-grpc="+filepath.Join(tools, "protoc-gen-go-grpc"),
		"--go_out="+out, "--go_opt=paths=source_relative",
		"--go-grpc_out="+out, "--go-grpc_opt=paths=source_relative",
		filepath.Join(root, "authz", "v1", "authz.proto"),
	)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, msg)
	}
	for _, name := range []string{"authz.pb.go", "authz_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(out, "authz", "v1", name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate`", name)
		}
	}
}

// pinned returns the value of NAME="value" in the generation script.
func pinned(script, name string) string {
	for _, line := range strings.Split(script, "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}
