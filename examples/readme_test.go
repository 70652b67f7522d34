// Package examples holds the Go programs the documentation shows
// (docs/go.md), as complete programs that build; this test keeps the
// copies in README.md and docs/ identical to them and checks what they
// print.
package examples

import (
	"bytes"
	"fmt"
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

// TestREADMEGoProgramsAreTheExamples: every marked Go block of the docs
// is a program under examples/, byte for byte, so that it builds with the
// module (go vet ./... and go build ./... compile it); an unmarked one is
// an excerpt of such programs.
func TestREADMEGoProgramsAreTheExamples(t *testing.T) {
	var shown []string
	for _, b := range readmeBlocks(t) {
		if b.lang != "go" {
			continue
		}
		file, ok := strings.CutPrefix(b.marker, "examples/")
		if !ok {
			// An unmarked block is an excerpt: each of its lines is a
			// line of a program under examples/, so it cannot show code
			// that no longer builds.
			if err := isExcerpt(b.body); err != nil {
				t.Errorf("a Go block of the docs is neither marked <!-- examples/<dir>/main.go --> nor an excerpt of one: %v\n%s", err, b.body)
			}
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

// isExcerpt reports whether every line of body, but "// …" elisions and
// blank lines, is a line (indentation and a trailing comment aside) of a
// Go file under examples/.
func isExcerpt(body string) error {
	files, err := filepath.Glob("*/*.go")
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(data), "\n") {
			if code, _, ok := strings.Cut(l, " // "); ok && strings.TrimSpace(code) != "" {
				l = code
			}
			known[strings.TrimSpace(l)] = true
		}
	}
	for _, l := range strings.Split(body, "\n") {
		// A comment after the code may differ from the file's.
		if code, _, ok := strings.Cut(l, " // "); ok && strings.TrimSpace(code) != "" {
			l = code
		}
		l = strings.TrimSpace(l)
		if l == "" || l == "// …" || strings.HasPrefix(l, "// …") {
			continue
		}
		if !known[l] {
			return fmt.Errorf("line %q is in no file of examples/", l)
		}
	}
	return nil
}
