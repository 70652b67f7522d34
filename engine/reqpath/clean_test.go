package reqpath

import (
	"slices"
	"testing"
)

// FuzzCleanNormalized: the normalized path Clean returns without joining
// (the target's own path, when already normalized) is the one
// JoinEscaped builds, and segments written into a caller's buffer are the
// ones Clean allocates.
func FuzzCleanNormalized(f *testing.F) {
	for _, s := range []string{
		"/", "/a", "/a/", "//a", "/a/b/c?x=1", "/a/./b", "/a/../b", "/a%2Fb", "/a%25b", "/%61",
		"/a/b/c/d/e/f/g/h/i/j", "/a/b/c/d/e/f/g/h", "/a//b", "/a/b#frag", "/..", "/a/%2e%2e/b", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		segs, norm, err := Clean(target, nil)
		var buf [8]string
		segs2, norm2, err2 := Clean(target, buf[:0])
		if (err == nil) != (err2 == nil) || norm != norm2 || !slices.Equal(segs, segs2) {
			t.Fatalf("Clean(%q, buf) = %q %q %v, Clean(%q, nil) = %q %q %v", target, segs2, norm2, err2, target, segs, norm, err)
		}
		if err != nil {
			return
		}
		if want := JoinEscaped(segs); norm != want {
			t.Fatalf("Clean(%q) normalized = %q, JoinEscaped = %q", target, norm, want)
		}
	})
}
