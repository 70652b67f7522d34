package testkit

import (
	"os"
	"testing"
)

// WriteFile writes data to path with perm (0o600 for a key, a secret or
// a configuration naming them), failing t when it cannot.
func WriteFile(t testing.TB, path string, data []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
}
