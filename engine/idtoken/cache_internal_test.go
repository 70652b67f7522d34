package idtoken

import (
	"strconv"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
)

// TestCacheBounded: the reuse cache never holds more than CacheSize
// tokens; entries no longer fresh go first.
func TestCacheBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	m, err := New(Options{KeyFile: testkit.TokenKeyFile(t), TTL: time.Minute, CacheSize: 8, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := m.Token("cred-"+strconv.Itoa(i), Claims{Subject: "u"}); err != nil {
			t.Fatal(err)
		}
		if n := m.cache.len(); n > 8 {
			t.Fatalf("%d entries after %d tokens, want at most 8", n, i+1)
		}
	}
	// Stale entries are dropped to make room.
	now = now.Add(31 * time.Second)
	if _, err := m.Token("fresh", Claims{Subject: "u"}); err != nil {
		t.Fatal(err)
	}
	if n := m.cache.len(); n > 8 {
		t.Fatalf("%d entries, want at most 8", n)
	}
}
