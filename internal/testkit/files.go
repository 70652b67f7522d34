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
