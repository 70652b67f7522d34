package main

import (
	"io"
	"os"
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

// TestReadmeCommandLines reads every core command line README.md and the
// pages of docs/ show (lines of their code blocks that begin with "core",
// "bin/core" or "$ core"; the generated reference is left out, being
// the command tree itself) and checks it against the command tree without
// running it:
// the command exists, each flag exists and takes its value, the number
// of arguments is right and required flags are present. A renamed
// command or flag then fails here instead of in a reader's terminal.
func TestReadmeCommandLines(t *testing.T) {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, page := range append(pages, "../../README.md") {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if i := strings.Index(text, "<!-- BEGIN GENERATED "); i >= 0 {
			text = text[:i]
		}
		lines = append(lines, readmeCoreLines(text)...)
	}
	if len(lines) < 30 {
		t.Fatalf("found %d core command lines in README.md and docs/; the extraction is broken", len(lines))
	}
	for _, line := range lines {
		words, err := shellWords(line)
		if err != nil {
			t.Errorf("docs line %q: %v", line, err)
			continue
		}
		root := NewRootCommand(io.Discard, io.Discard)
		cmd, rest, err := root.Find(words[1:])
		if err != nil || cmd == root {
			t.Errorf("docs line %q: no such command (%v)", line, err)
			continue
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Errorf("docs line %q: %v", line, err)
			continue
		}
		if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
			t.Errorf("docs line %q: %v", line, err)
		}
		if err := cmd.ValidateRequiredFlags(); err != nil {
			t.Errorf("docs line %q: %v", line, err)
		}
		// Files of the repository it names exist (a fresh clone has them).
		for _, w := range words {
			w = strings.TrimPrefix(w, "@")
			if strings.HasPrefix(w, "policies/") || strings.HasPrefix(w, "svc.example.") {
				if _, err := os.Stat("../../" + w); err != nil {
					t.Errorf("docs line %q names %s, which the repository does not have", line, w)
				}
			}
		}
	}
}

// readmeCoreLines returns the core command lines of the README's code
// blocks, continuation lines joined, without the prompt.
func readmeCoreLines(readme string) []string {
	var out []string
	inBlock := false
	var pending string
	for _, l := range strings.Split(readme, "\n") {
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock {
			continue
		}
		if pending != "" {
			pending += " " + strings.TrimSpace(l)
		} else {
			l = strings.TrimPrefix(l, "$ ")
			if !strings.HasPrefix(l, "core ") && !strings.HasPrefix(l, "bin/core ") {
				continue
			}
			pending = l
		}
		if strings.HasSuffix(pending, "\\") {
			pending = strings.TrimSuffix(pending, "\\")
			continue
		}
		out = append(out, pending)
		pending = ""
	}
	return out
}

// shellWords splits a command line as sh would for the plain forms the
// README uses: single and double quotes, and the end of the command at an
// unquoted #, |, &&, ; or >.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		case r == '#' && !inWord, r == '|', r == ';', r == '>', r == '&' && strings.HasPrefix(line[i:], "&&"):
			if inWord {
				words = append(words, cur.String())
			}
			return words, nil
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, io.ErrUnexpectedEOF
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
