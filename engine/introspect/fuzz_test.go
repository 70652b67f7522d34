package introspect

import (
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// FuzzParse checks that parse never panics, refuses with
// introspection-invalid alone, and that an answer it accepts has the
// shapes the engine relies on.
func FuzzParse(f *testing.F) {
	for _, seed := range testkit.ReadGlob(f, filepath.Join("testdata", "*")) {
		f.Add(seed.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := parse(data, DefaultTenantClaim)
		if err != nil {
			if reason.Of(err, "") != reason.IntrospectionInvalid {
				t.Fatalf("refused with %v", err)
			}
			return
		}
		if a == nil {
			return
		}
		if a.Roles == nil || a.Claims["active"] != true || a.Exp < 0 {
			t.Fatalf("accepted answer %+v", a)
		}
	})
}

// FuzzLooksLikeJWS checks that every string LooksLikeJWS accepts has two
// dots and base64url characters alone.
func FuzzLooksLikeJWS(f *testing.F) {
	for _, s := range []string{"a.b.c", "eyJhbGciOiJSUzI1NiJ9.e30.", "opaque", "a..", "..", "a.b.c.d", "a+b.c.d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !LooksLikeJWS(s) {
			return
		}
		dots := 0
		for _, r := range s {
			switch {
			case r == '.':
				dots++
			case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			default:
				t.Fatalf("accepted %q", s)
			}
		}
		if dots != 2 || s[0] == '.' {
			t.Fatalf("accepted %q", s)
		}
	})
}
