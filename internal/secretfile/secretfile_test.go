package secretfile

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content, want string
		err           error
	}{
		{"s3cret", "s3cret", nil},
		{"s3cret\n", "s3cret", nil},
		{"s3cret\r\n", "s3cret", nil},
		{"  s3 cret \n\n", "s3 cret", nil},
		{"", "", errEmpty},
		{" \n\t\n", "", errEmpty},
		{"s3cret\nother\n", "", errLines},
		{"s3cret\rother", "", errLines},
	} {
		path := filepath.Join(dir, "secret")
		testkit.WriteFile(t, path, []byte(tc.content))
		got, err := Read("x.token_file", path)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("Read(%q) = %q, %v; want %q, %v", tc.content, got, err, tc.want, tc.err)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "x.token_file: "+path+" ") {
				t.Errorf("error %q does not name the setting and the file", err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q names the secret", err)
			}
		}
	}
	_, err := Read("x.token_file", filepath.Join(dir, "missing"))
	var se *Error
	if !errors.As(err, &se) || se.Key != "x.token_file" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("s3cret\n")
	f.Add("a\nb")
	f.Fuzz(func(t *testing.T, content string) {
		s, err := parse(content)
		if err != nil {
			return
		}
		if s == "" || strings.ContainsAny(s, "\r\n") || s != strings.TrimSpace(s) || !strings.Contains(content, s) {
			t.Fatalf("parse(%q) = %q", content, s)
		}
	})
}
