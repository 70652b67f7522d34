package wire_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/wire"
)

// FuzzParseDropped: any stream line, as core reads it from the sidecar,
// is a drop notice or not without a panic, and a notice read is one the
// sidecar could have written.
func FuzzParseDropped(f *testing.F) {
	for _, seed := range testkit.ReadGlob(f, filepath.Join("testdata", "*.json")) {
		f.Add(seed.Data)
	}
	f.Add([]byte(`{"dropped":3,"type":"dropped"}`))
	f.Add([]byte(`{"type":"dropped","dropped":-1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		n, ok := wire.ParseDropped(line)
		if !ok {
			return
		}
		b, err := json.Marshal(wire.DroppedNotice{Dropped: n, Type: wire.DroppedType})
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := wire.ParseDropped(b); !ok || m != n {
			t.Errorf("notice %s reads back as %d, %v", b, m, ok)
		}
	})
}

// FuzzAPIKeyFromHeaders: any pair of header values gives a key without a
// panic; a key is never read from X-Api-Key beside an Authorization
// header, and one of the ApiKey scheme is the header's credential.
func FuzzAPIKeyFromHeaders(f *testing.F) {
	f.Add("ApiKey svck_abc_def", true, "")
	f.Add("apikey\tsvck_abc_def ", true, "svck_other")
	f.Add("Bearer x", true, "svck_abc_def")
	f.Add("", false, " svck_abc_def ")
	f.Add("ApiKey", true, "")
	f.Add("ApiKeyx y", true, "")
	f.Fuzz(func(t *testing.T, auth string, hasAuth bool, xAPIKey string) {
		key := wire.APIKeyFromHeaders(auth, hasAuth, xAPIKey)
		if key == "" {
			return
		}
		if key != strings.TrimSpace(key) {
			t.Fatalf("key %q keeps surrounding space", key)
		}
		if hasAuth && !strings.Contains(auth, key) {
			t.Fatalf("key %q is not from Authorization %q", key, auth)
		}
		if hasAuth && !strings.EqualFold(strings.TrimSpace(auth)[:6], "apikey") {
			t.Fatalf("key %q from Authorization %q of another scheme", key, auth)
		}
	})
}
