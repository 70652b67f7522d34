package envoy

import (
	"slices"
	"strings"
	"testing"
)

// FuzzCleanPathNormalized: the normalized path cleanPath returns without
// joining (the target's own path, when already normalized) is the one
// joinSegments builds, and segments written into a caller's buffer are
// the ones cleanPath allocates.
func FuzzCleanPathNormalized(f *testing.F) {
	for _, s := range []string{
		"/", "/a", "/a/", "//a", "/a/b/c?x=1", "/a/./b", "/a/../b", "/a%2Fb", "/a%25b", "/%61",
		"/a/b/c/d/e/f/g/h/i/j", "/a/b/c/d/e/f/g/h", "/a//b", "/a/b#frag", "/..", "/a/%2e%2e/b", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		segs, norm, err := cleanPath(target)
		var buf [8]string
		segs2, norm2, err2 := cleanPathInto(target, buf[:0])
		if (err == nil) != (err2 == nil) || norm != norm2 || !slices.Equal(segs, segs2) {
			t.Fatalf("cleanPathInto(%q) = %q %q %v, cleanPath = %q %q %v", target, segs2, norm2, err2, segs, norm, err)
		}
		if err != nil {
			return
		}
		if want := joinSegments(segs); norm != want {
			t.Fatalf("cleanPath(%q) normalized = %q, joinSegments = %q", target, norm, want)
		}
	})
}

// TestMappedRequestJoin: the default action is resource:verb whether it
// fits the block or not, and one request's action is not rewritten by the
// next's.
func TestMappedRequestJoin(t *testing.T) {
	long := strings.Repeat("r", 40)
	for _, tc := range []struct{ resource, verb string }{
		{"orders", "read"}, {"", "read"}, {"o", ""}, {strings.Repeat("r", 26), "read"},
		{strings.Repeat("r", 27), "read"}, {long, "delete"},
	} {
		var b mappedRequest
		got := b.join(tc.resource, tc.verb)
		want := tc.resource + ":" + tc.verb
		other := new(mappedRequest).join("x", "y")
		if got != want || other != "x:y" {
			t.Errorf("join(%q, %q) = %q, want %q", tc.resource, tc.verb, got, want)
		}
	}
}
