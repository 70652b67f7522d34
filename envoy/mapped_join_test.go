package envoy

import (
	"strings"
	"testing"
)

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
