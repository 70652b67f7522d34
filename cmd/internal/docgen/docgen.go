// Package docgen generates the parts of the reference in docs/ that the
// code already knows: the configuration keys (engine/config), the reason
// codes (package reason, their one home) and the command
// trees of core and svc-sidecar. A generated part sits between two marker
// lines in its page, so the prose around it stays hand-written; the tests
// of this package and of cmd/core and cmd/svc-sidecar regenerate every
// part and fail when a page is not current (`make docs` rewrites them).
package docgen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// Begin and End are the marker lines around the generated part name.
func Begin(name string) string {
	return "<!-- BEGIN GENERATED " + name + ": do not edit, run make docs -->"
}

// End is the line that closes the generated part name.
func End(name string) string { return "<!-- END GENERATED " + name + " -->" }

// Replace returns page with the generated part name replaced by body.
// It is an error when the page lacks either marker, so a generated part
// cannot silently disappear from its page.
func Replace(page, name, body string) (string, error) {
	b, e := Begin(name), End(name)
	i := strings.Index(page, b+"\n")
	if i < 0 {
		return "", fmt.Errorf("no line %q", b)
	}
	rest := page[i+len(b)+1:]
	j := strings.Index(rest, e)
	if j < 0 {
		return "", fmt.Errorf("no line %q after %q", e, b)
	}
	// Blank lines around the body, so that a table or heading never
	// touches a marker line.
	body = "\n" + strings.Trim(body, "\n") + "\n\n"
	return page[:i+len(b)+1] + body + rest[j:], nil
}

// UpdateFile regenerates part name of the file at path. With update it
// writes the file when it changed; without, it returns an error naming
// the file when it is not current.
func UpdateFile(path, name, body string, update bool) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	updated, err := Replace(string(old), name, body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if updated == string(old) {
		return nil
	}
	if update {
		// Write beside and rename, so that a reader never sees half a page.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(updated), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	}
	return fmt.Errorf("%s: the generated part %q is not current; run make docs", path, name)
}

// ModuleRoot is the repository's root directory (this file's ../../..).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Cell makes text fit one cell of a Markdown table.
func Cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// Code is s as inline code, or empty when s is.
func Code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + s + "`"
}

var envSentence = regexp.MustCompile(`\s*Env (?:only )?SVC_[A-Z0-9_]+(?:, SVC_[A-Z0-9_]+)*(?: \([^)]*\))?\.`)

// docText is a doc comment as one line of prose, without the
// "Env SVC_X." sentence (the tables give the variable a column).
func docText(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.TrimSpace(envSentence.ReplaceAllString(strings.Join(strings.Fields(g.Text()), " "), ""))
}

// parseDir parses the non-test Go files of dir, with comments.
func parseDir(dir string) ([]*ast.File, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}
