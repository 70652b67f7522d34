package testkit

import (
	"strings"
	"testing"
)

// ExpectErr checks the error of a table case against want, a part of the
// message the case expects, or "" for a case that must succeed: it fails
// t at once when err does not contain a non-empty want, or when err is
// not nil though want is empty. It reports whether the case expected an
// error, where the caller's case ends.
func ExpectErr(t testing.TB, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want one containing %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatalf("error %v, want none", err)
	}
	return false
}
