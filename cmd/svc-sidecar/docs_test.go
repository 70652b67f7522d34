package main

import (
	"bytes"
	"flag"
	"io"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/cmd/internal/docgen"
)

var update = flag.Bool("update", false, "rewrite the generated svc-sidecar part of docs/cli.md")

// TestCLIReferenceCurrent regenerates the svc-sidecar part of docs/cli.md
// from its --help (-update rewrites it; make docs does).
func TestCLIReferenceCurrent(t *testing.T) {
	var help bytes.Buffer
	if code := run([]string{"--help"}, &help, io.Discard); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	path := filepath.Join(docgen.ModuleRoot(), "docs", "cli.md")
	if err := docgen.UpdateFile(path, "svc-sidecar", docgen.HelpReference("svc-sidecar", help.String()), *update); err != nil {
		t.Error(err)
	}
}
