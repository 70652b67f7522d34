package e2e

import (
	"regexp"
	"strings"
	"testing"
)

// answersInOrder fails the test unless out matches each pattern, each
// after the match of the one before: the answers a documented block shows,
// in its order.
func answersInOrder(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	rest := out
	for _, p := range patterns {
		loc := regexp.MustCompile(p).FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("the answers of %s lack %s, in order:\n%s", what, p, out)
		}
		rest = rest[loc[1]:]
	}
}

// shBlockAfter returns the first sh code block after the line marker.
func shBlockAfter(t *testing.T, page, marker string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, "\n"+marker)
	if !ok {
		t.Fatalf("no line starting with %q", marker)
	}
	_, rest, ok = strings.Cut(rest, "\n```sh\n")
	if !ok {
		t.Fatalf("no sh block after %q", marker)
	}
	block, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		t.Fatal("unterminated sh block")
	}
	return block
}
