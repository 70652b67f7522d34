package main

import (
	"io"
	"path/filepath"
	"strings"
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

// TestCLIReferenceMachineFree: the reference reads the same on every
// machine. A default taken from the home directory or the user's
// configuration directory would put the generating machine's paths on
// the page, and the check above would then fail for everyone else.
func TestCLIReferenceMachineFree(t *testing.T) {
	t.Setenv(envSidecarURL, "")
	ref := func(home, xdg string) string {
		t.Setenv("HOME", home)
		t.Setenv("XDG_CONFIG_HOME", xdg)
		return docgen.CobraReference(NewRootCommand(io.Discard, io.Discard))
	}
	a, b := ref("/home/a", ""), ref("/home/b", "/etc/b-config")
	if a == b {
		return
	}
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			t.Fatalf("the reference depends on HOME or XDG_CONFIG_HOME, line %d:\n%s\n%s", i+1, al[i], bl[i])
		}
	}
	t.Fatalf("the reference depends on HOME or XDG_CONFIG_HOME: %d lines against %d", len(al), len(bl))
}
