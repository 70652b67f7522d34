package wire_test

import (
	"testing"

	"github.com/svc-dev/svc/wire"
)

// TestValidCookieName: the session cookie's name is a plain token of
// letters, digits, '-', '_' and '.', nothing a Cookie header would split
// or a browser would refuse.
func TestValidCookieName(t *testing.T) {
	for name, want := range map[string]bool{
		"svc_session": true, "Session-1.v2": true, "__Host-x": true, "x": true,
		"": false, "a b": false, "a;b": false, "a=b": false, "a,b": false, `a"b`: false,
		"sessión": false, "a\tb": false, "a/b": false,
	} {
		if got := wire.ValidCookieName(name); got != want {
			t.Errorf("ValidCookieName(%q) = %v, want %v", name, got, want)
		}
	}
}
