package policy

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestShardTable inserts and looks up keys whose hashes share their high
// halves (the table's probe sequences overlap) and, for some, whole hashes
// (the key decides), in a shard small enough to evict all the time. After
// every step: each entry is found where the table says, the table holds
// exactly the entries, no key is stored twice, and a lookup answers the
// decision last stored under that key or nothing.
func TestShardTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sh := &cacheShard{capacity: 37}
	last := map[string]bool{}
	keyOf := func(n int) cacheKey {
		// 8 tags, and pairs of keys with one hash.
		// Some keys longer than an entry holds inline.
		key := "k" + strconv.Itoa(n)
		if n%3 == 0 {
			key += strings.Repeat("-", inlineKey)
		}
		return cacheKey{key: []byte(key), hash: uint64(n%8)<<32 | uint64(n/2)}
	}
	for step := range 20000 {
		k := keyOf(rng.IntN(300))
		if rng.IntN(3) == 0 {
			allow := rng.IntN(2) == 0
			sh.insert(&k, allow, nil)
			last[string(k.key)] = allow
			if got, _, ok := sh.lookup(&k); !ok || got != allow {
				t.Fatalf("step %d: %s just stored as %v, lookup = %v, %v", step, k.key, allow, got, ok)
			}
		} else if got, _, ok := sh.lookup(&k); ok && got != last[string(k.key)] {
			t.Fatalf("step %d: %s = %v, last stored %v", step, k.key, got, last[string(k.key)])
		}
		used := 0
		for _, s := range sh.table {
			if s != 0 {
				used++
			}
		}
		if used != len(sh.entries) || len(sh.entries) > sh.capacity || 2*len(sh.entries) > len(sh.table) {
			t.Fatalf("step %d: %d slots used for %d entries (capacity %d), table of %d", step, used, len(sh.entries), sh.capacity, len(sh.table))
		}
		seen := map[string]bool{}
		for i := range sh.entries {
			e := &sh.entries[i]
			key := string(e.inline[:min(e.n, inlineKey)]) + e.long
			if e.n > inlineKey {
				key = e.long
			}
			if len(key) != int(e.n) || seen[key] {
				t.Fatalf("step %d: %q stored twice or with length %d", step, key, e.n)
			}
			seen[key] = true
			ek := cacheKey{key: []byte(key), hash: e.hash}
			if p := sh.find(&ek); p < 0 || int(uint32(sh.table[p]))-1 != i {
				t.Fatalf("step %d: entry %d (%s) found at %d", step, i, key, p)
			}
		}
	}
	if len(sh.entries) != sh.capacity {
		t.Fatalf("%d entries after 20000 steps, want the capacity %d", len(sh.entries), sh.capacity)
	}
}

// TestCacheEntrySize: an entry is three whole cache lines.
func TestCacheEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(cacheEntry{}); n != 192 {
		t.Fatalf("cacheEntry is %d bytes, want 192 (adjust inlineKey)", n)
	}
}
