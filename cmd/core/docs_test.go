package main

import (
	"io"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/cmd/internal/docgen"
)

// TestCLIReferenceCurrent regenerates the core part of docs/cli.md from
// the command tree (-update rewrites it; make docs does).
func TestCLIReferenceCurrent(t *testing.T) {
	// --sidecar's default comes from the environment; the page shows
	// the default without it.
	t.Setenv(envSidecarURL, "")
	ref := docgen.CobraReference(NewRootCommand(io.Discard, io.Discard))
	path := filepath.Join(docgen.ModuleRoot(), "docs", "cli.md")
	if err := docgen.UpdateFile(path, "core", ref, *update); err != nil {
		t.Error(err)
	}
}
