package reqpath

import (
	"encoding/json"
	"os"
	"path"
	"strings"
	"testing"
	"unsafe"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// canonCase is one case of testdata/canonical.json; Formats nil means
// DefaultFormats.
type canonCase struct {
	Path          string    `json:"path"`
	CaseSensitive bool      `json:"case_sensitive"`
	Formats       *[]string `json:"formats"`
	Canonical     string    `json:"canonical"`
	Format        string    `json:"format"`
	Error         bool      `json:"error"`
}

func (tc canonCase) canon() Canon {
	c := Canon{CaseSensitive: tc.CaseSensitive, Formats: DefaultFormats}
	if tc.Formats != nil {
		c.Formats = *tc.Formats
	}
	return c
}

func readCanonCases(tb testing.TB) []canonCase {
	tb.Helper()
	raw, err := os.ReadFile("testdata/canonical.json")
	if err != nil {
		tb.Fatal(err)
	}
	var cases []canonCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		tb.Fatal(err)
	}
	return cases
}

func TestCanonPath(t *testing.T) {
	for _, tc := range readCanonCases(t) {
		t.Run(tc.Path, func(t *testing.T) {
			got, format, err := tc.canon().Path(tc.Path)
			if tc.Error {
				if reason.Of(err, "") != reason.PathInvalid {
					t.Fatalf("Path(%q) = %q, %q, %v; want a %s error", tc.Path, got, format, err, reason.PathInvalid)
				}
				return
			}
			if err != nil || got != tc.Canonical || format != tc.Format {
				t.Fatalf("Path(%q) = %q, %q, %v; want %q, %q", tc.Path, got, format, err, tc.Canonical, tc.Format)
			}
		})
	}
}

// TestCanonPathNoAlloc: the path of almost every request is already
// canonical, or loses only its suffix; making it canonical costs no
// allocation, and the result shares the request's bytes.
func TestCanonPathNoAlloc(t *testing.T) {
	c := Canon{Formats: DefaultFormats}
	for _, p := range []string{"/", "/api/reports/export", "/api/reports/export.json", "/users/alice@example.com", "/a/b/c/d/e/f/g/h/i/j/k/l/m"} {
		var got string
		allocs := testing.AllocsPerRun(100, func() {
			got, _, _ = c.Path(p)
		})
		if allocs != 0 {
			t.Errorf("Path(%q): %v allocations, want 0", p, allocs)
		}
		if unsafe.StringData(got) != unsafe.StringData(p) {
			t.Errorf("Path(%q) = %q, a copy", p, got)
		}
	}
}

// FuzzCanonPath holds Path to its contract on any input: it refuses what
// Clean refuses; the result is absolute, without empty or dot segments,
// lower-case unless case-sensitive; the same for every ASCII letter case
// of the request when folding; what a format cut leaves plus the format
// is the path without formats; and, for a path without escapes, it is
// what path.Clean makes of it.
func FuzzCanonPath(f *testing.F) {
	for _, tc := range readCanonCases(f) {
		f.Add(tc.Path, tc.CaseSensitive)
	}
	f.Fuzz(func(t *testing.T, p string, caseSensitive bool) {
		c := Canon{CaseSensitive: caseSensitive, Formats: DefaultFormats}
		got, format, err := c.Path(p)
		if _, _, cerr := Clean(p, nil); (err == nil) != (cerr == nil) {
			t.Fatalf("Path(%q) error %v, Clean error %v", p, err, cerr)
		}
		if err != nil {
			if reason.Of(err, "") != reason.PathInvalid {
				t.Fatalf("Path(%q): %v without reason %s", p, err, reason.PathInvalid)
			}
			return
		}
		if !strings.HasPrefix(got, "/") {
			t.Fatalf("Path(%q) = %q, not absolute", p, got)
		}
		if got != "/" {
			for _, seg := range strings.Split(got[1:], "/") {
				if seg == "" || seg == "." || seg == ".." {
					t.Fatalf("Path(%q) = %q holds segment %q", p, got, seg)
				}
			}
		}
		whole, _, _ := Canon{CaseSensitive: caseSensitive}.Path(p)
		switch {
		case format == "" && whole != got:
			t.Fatalf("Path(%q) = %q without a format cut, %q without formats", p, got, whole)
		case format != "" && !strings.EqualFold(whole, got+"."+format):
			t.Fatalf("Path(%q) = %q, %q; without formats %q", p, got, format, whole)
		}
		if !caseSensitive {
			if got != strings.ToLower(got) {
				t.Fatalf("Path(%q) = %q, not lower-case", p, got)
			}
			swapped, sformat, err := c.Path(testkit.SwapASCIICase(p))
			if err != nil || swapped != got || sformat != format {
				t.Fatalf("Path(%q) = %q %q, its case swapped %q %q %v", p, got, format, swapped, sformat, err)
			}
		}
		if caseSensitive && !strings.ContainsAny(p, "%?#") {
			if want := path.Clean(p); whole != want {
				t.Fatalf("Path(%q) = %q without formats, path.Clean = %q", p, whole, want)
			}
		}
	})
}

// BenchmarkCanonPath makes an already canonical path and a variant that
// needs every step canonical.
func BenchmarkCanonPath(b *testing.B) {
	c := Canon{Formats: DefaultFormats}
	for _, p := range []string{"/api/reports/r7/export", "/API//reports/x/../R7/%65xport.JSON"} {
		b.Run(p, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := c.Path(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
