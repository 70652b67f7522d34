package authzv1_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedCodeIsCurrent regenerates the Go code of authz.proto the
// way scripts/generate.sh does and compares it with the committed files.
// It is skipped where the pinned toolchain is not installed (run
// `make generate` once to install it).
func TestGeneratedCodeIsCurrent(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tools := filepath.Join(root, "bin", "tools")
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("protoc is not installed")
	}
	for _, p := range []string{"protoc-gen-go", "protoc-gen-go-grpc"} {
		if _, err := os.Stat(filepath.Join(tools, p)); err != nil {
			t.Skipf("%s is not installed in bin/tools", p)
		}
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
		t.Skipf("protoc is %s, the generated code is pinned to %s", bytes.TrimSpace(version), want)
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
