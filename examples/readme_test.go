// Package examples holds the Go programs the documentation shows
// (docs/go.md), as complete programs that build; this test keeps the
// copies in README.md and docs/ identical to them and checks what they
// print.
package examples

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fence is a fenced code block of a page with the marker line before
// it: <!-- examples/<dir>/main.go --> or <!-- output of examples/<dir> -->.
var fence = regexp.MustCompile("(?m)^(?:<!-- (.+?) -->\\n)?```(\\w*)\\n((?s:.*?))^```$")

type block struct{ marker, lang, body string }

func readmeBlocks(t *testing.T) []block {
	t.Helper()
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	for _, page := range append(pages, "../README.md") {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fence.FindAllStringSubmatch(string(text), -1) {
			blocks = append(blocks, block{marker: m[1], lang: m[2], body: m[3]})
		}
	}
	return blocks
}

// TestREADMEGoProgramsAreTheExamples: every Go block of the docs is a
// program under examples/, byte for byte, so that it builds with the
// module (go vet ./... and go build ./... compile it).
func TestREADMEGoProgramsAreTheExamples(t *testing.T) {
	var shown []string
	for _, b := range readmeBlocks(t) {
		if b.lang != "go" {
			continue
		}
		file, ok := strings.CutPrefix(b.marker, "examples/")
		if !ok {
			t.Errorf("a Go block of the docs is not marked <!-- examples/<dir>/main.go -->:\n%s", b.body)
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("the docs show %s: %v", b.marker, err)
			continue
		}
		if b.body != string(want) {
			t.Errorf("the docs' copy of %s differs from the file; copy the file into the page", b.marker)
		}
		shown = append(shown, file)
	}
	for _, want := range []string{"sidecar-client/main.go", "in-process/main.go"} {
		if !slices.Contains(shown, want) {
			t.Errorf("the docs do not show examples/%s", want)
		}
	}
}

// TestInProcessOutput runs the in-process example as a user would and
// compares what it prints with docs/go.md.
func TestInProcessOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	var want string
	for _, b := range readmeBlocks(t) {
		if b.marker == "output of examples/in-process" {
			want = b.body
		}
	}
	if want == "" {
		t.Fatal("the docs do not show the output of examples/in-process")
	}
	cmd := exec.Command("go", "run", "./in-process")
	cmd.Dir = "."
	// A user's first run: no SVC_* variable set.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run ./in-process: %v\n%s", err, stderr.String())
	}
	if stdout.String() != want {
		t.Errorf("go run ./examples/in-process printed\n%s\nthe docs show\n%s", stdout.String(), want)
	}
	if !strings.Contains(stderr.String(), "DEVELOPMENT MODE") {
		t.Errorf("no development-mode warning on stderr:\n%s", stderr.String())
	}
}
