package testkit

import (
	"os"
	"testing"
)

// WriteFileMode is WriteFile with another mode than the owner's alone
// (a script made executable, a file others must read), failing t when it
// cannot.
func WriteFileMode(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
}
