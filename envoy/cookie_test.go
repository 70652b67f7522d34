package envoy

import (
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// TestCookieValueAllocs: reading the session cookie is on every browser
// check's path, and looking for the "__Host-" cookie next to the
// unprefixed one costs no allocation.
func TestCookieValueAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	header := "theme=dark; svc_session=tossed; lang=fr; __Host-svc_session=host.tok"
	var got string
	if n := testing.AllocsPerRun(100, func() { got = cookieValue(header, "__Host-svc_session", "svc_session") }); n != 0 {
		t.Errorf("cookieValue: %v allocations, want 0", n)
	}
	if got != "host.tok" {
		t.Errorf("cookieValue = %q, want host.tok", got)
	}
}
