package testkit

import (
	"os"
	"path/filepath"
	"testing"
)

// File is a file's path and contents.
type File struct {
	Path string
	Data []byte
}

// ReadGlob returns the files that match pattern, in name order, with
// their contents. It fails t when pattern is malformed, a file cannot be
// read, or nothing matches: testdata that went missing would otherwise
// leave a fuzz target unseeded or a table test empty, and still pass.
func ReadGlob(t testing.TB, pattern string) []File {
	t.Helper()
	paths, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no file matches %s", pattern)
	}
	files := make([]File, len(paths))
	for i, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = File{Path: p, Data: b}
	}
	return files
}

// WriteFile writes data to path, readable by the owner alone (0600, as
// keys, tokens and configurations are kept); a failure fails t.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TempFile writes data to a file named name in a new temporary directory
// of t, as WriteFile does, and returns its path.
func TempFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	WriteFile(t, p, data)
	return p
}
