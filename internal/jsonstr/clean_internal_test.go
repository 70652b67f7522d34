package jsonstr

import (
	"math/rand/v2"
	"testing"
)

// clean8Want is clean8 byte by byte, from the tables.
func clean8Want(x uint64, html bool) bool {
	safe := &safeSet
	if html {
		safe = &htmlSafeSet
	}
	for range 8 {
		if !safe[byte(x)] {
			return false
		}
		x >>= 8
	}
	return true
}

// TestClean8MatchesTables: the word-at-a-time test agrees with the tables
// on every byte value at every position over every background byte, and
// on random words (several unsafe bytes, borrows between them).
func TestClean8MatchesTables(t *testing.T) {
	check := func(x uint64) {
		t.Helper()
		for _, html := range []bool{false, true} {
			if got, want := clean8(x, html), clean8Want(x, html); got != want {
				t.Fatalf("clean8(%#016x, html=%v) = %v, want %v", x, html, got, want)
			}
		}
	}
	for bg := range 256 {
		for pos := range 8 {
			for v := range 256 {
				x := uint64(bg) * ones
				x &^= 0xff << (8 * pos)
				x |= uint64(v) << (8 * pos)
				check(x)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(r.Uint64())
		// Mostly printable ASCII, where the tests are closest.
		check(r.Uint64() & 0x7f7f7f7f7f7f7f7f)
	}
}

func TestLoad8(t *testing.T) {
	if got := load8("xabcdefgh", 1); got != 0x6867666564636261 {
		t.Fatalf("load8 = %#x", got)
	}
}
