package oidcgw

import (
	"testing"
	"time"
)

// TestEvictingStore: past its bound the store pushes out its oldest
// entry; an entry taken or put again is not pushed out in its old place,
// and what it remembers of the order stays within twice its entries.
func TestEvictingStore(t *testing.T) {
	ctx := t.Context()
	s := newEvictingStore(time.Now, 3)
	put := func(keys ...string) {
		t.Helper()
		for _, k := range keys {
			if err := s.Put(ctx, k, []byte(k), time.Minute); err != nil {
				t.Fatal(err)
			}
		}
	}
	holds := func(want ...string) {
		t.Helper()
		if len(s.m) != len(want) {
			t.Errorf("the store holds %d entries, want %v", len(s.m), want)
		}
		for _, k := range want {
			if v, _ := s.Get(ctx, k); string(v) != k {
				t.Errorf("%s: %q, want it kept", k, v)
			}
		}
	}
	put("a", "b", "c")
	if v, _ := s.Take(ctx, "b"); string(v) != "b" {
		t.Fatalf("take b: %q", v)
	}
	put("d")
	holds("a", "c", "d")
	put("e") // full: a, the oldest, goes
	holds("c", "d", "e")
	put("d") // put again: now the newest
	put("f") // b, taken, is skipped: c goes
	holds("d", "e", "f")
	put("g") // d's first place is skipped: e goes
	holds("d", "f", "g")

	for i := range 10_000 {
		k := string(rune('A' + i%1000))
		put(k)
		_, _ = s.Take(ctx, k)
	}
	if n := len(s.order); n > 2*max(len(s.m), 1024) {
		t.Errorf("the order holds %d keys for %d entries", n, len(s.m))
	}
}
