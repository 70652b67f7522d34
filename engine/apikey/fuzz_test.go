package apikey

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
)

// FuzzParse checks that Parse never panics, and that a file it accepts
// holds no key prefix and no repeated id.
func FuzzParse(f *testing.F) {
	for _, seed := range testkit.ReadGlob(f, filepath.Join("testdata", "*.toml")) {
		f.Add(seed.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, k := range set.Keys() {
			if seen[k.ID] || !ValidID(k.ID) || k.Tenant == "" || k.Subject == "" {
				t.Fatalf("accepted entry %+v", k)
			}
			seen[k.ID] = true
		}
		if plaintextLine(data) != 0 {
			t.Fatal("accepted a file holding the key prefix")
		}
	})
}

// FuzzSplit checks that Split never panics, returns the id a key
// carries, and agrees with Verify on what is malformed.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{adminKey, viewerKey, "", "svck_", "svck_aeaqcaibaeaq_", adminKey + "A"} {
		f.Add(s)
	}
	set := readSet(f, "valid.toml")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, key string) {
		id, ok := Split(key)
		_, code := set.Verify(key, now)
		if !ok {
			if code != "api-key-malformed" {
				t.Fatalf("Split refused %q but Verify says %v", key, code)
			}
			return
		}
		if len(key) != keyLen || key[len(Prefix):len(Prefix)+idLen] != id {
			t.Fatalf("Split(%q) = %q", key, id)
		}
		if code == "api-key-malformed" {
			t.Fatalf("Split accepted %q but Verify says malformed", key)
		}
	})
}
