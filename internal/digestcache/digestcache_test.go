package digestcache_test

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/svc-dev/svc/internal/digestcache"
	"github.com/svc-dev/svc/internal/testkit"
)

func key(s string) digestcache.Key { return sha256.Sum256([]byte(s)) }

func never(int) bool { return false }

// The cache holds about its size; a full shard drops a stale entry of
// its sample before a live one.
func TestBoundAndEviction(t *testing.T) {
	const size = 256
	c := digestcache.New[int](size)
	for i := range 10 * size {
		k := key(fmt.Sprint("token-", i))
		c.Put(&k, i, c.Epoch(), never)
	}
	if n := c.Stats().Entries; n > size+digestcache.Shards || n < size/2 {
		t.Fatalf("%d entries after 10x inserts, want about %d", n, size)
	}

	c = digestcache.New[int](digestcache.Shards) // one entry per shard
	var a, b digestcache.Key
	a[0], b[0] = 5, 5+digestcache.Shards // the same shard
	c.Put(&a, -1, c.Epoch(), never)
	c.Put(&b, 1, c.Epoch(), func(v int) bool { return v < 0 })
	if _, ok := c.Get(&a); ok {
		t.Fatal("the stale entry kept over a new one")
	}
	if v, ok := c.Get(&b); !ok || v != 1 {
		t.Fatalf("new entry: %d, %v", v, ok)
	}
}

// A value computed before Retain is not stored after it; Retain drops
// what keep refuses; Get and Miss are counted.
func TestEpochRetainStats(t *testing.T) {
	c := digestcache.New[string](64)
	k1, k2 := key("a"), key("b")
	epoch := c.Epoch()
	c.Put(&k1, "kid-1", epoch, nil)
	if n := c.Retain(func(v string) bool { return v != "kid-1" }); n != 1 {
		t.Fatalf("Retain dropped %d, want 1", n)
	}
	c.Put(&k2, "kid-2", epoch, nil)
	if _, ok := c.Get(&k2); ok {
		t.Fatal("a value computed before Retain was stored after it")
	}
	c.Put(&k2, "kid-2", c.Epoch(), nil)
	c.Miss(&k1)
	if v, ok := c.Get(&k2); !ok || v != "kid-2" {
		t.Fatalf("Get = %q, %v", v, ok)
	}
	c.Remove(&k2)
	if st := c.Stats(); st != (digestcache.Stats{Entries: 0, Hits: 1, Misses: 1}) {
		t.Fatalf("stats %+v", st)
	}
}

func TestConcurrentUse(t *testing.T) {
	c := digestcache.New[int](128)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				k := key(fmt.Sprint(g, i%300))
				if _, ok := c.Get(&k); !ok {
					c.Miss(&k)
					c.Put(&k, i, c.Epoch(), never)
				}
				if i%500 == 0 {
					c.Retain(func(v int) bool { return v%2 == 0 })
				}
			}
		})
	}
	wg.Wait()
	if n := c.Stats().Entries; n > 128+digestcache.Shards {
		t.Fatalf("%d entries in a cache of 128", n)
	}
}

// A full cache taking ever new keys keeps the memory it had when it
// filled: its maps do not grow with the deletions of its evictions.
func TestChurnKeepsTheHeap(t *testing.T) {
	// A value of the verified-token cache's entry size (112 bytes),
	// which a map keeps in its slots.
	type value [14]int64
	const size = 20_000
	c := digestcache.New[value](size)
	i := 0
	put := func(n int) {
		for range n {
			k := key(fmt.Sprint("token-", i))
			c.Put(&k, value{int64(i)}, c.Epoch(), nil)
			i++
		}
	}
	testkit.HeapFlatOnceFull(t, size, put)
	if n := c.Stats().Entries; n > size+digestcache.Shards {
		t.Fatalf("%d entries in a cache of %d", n, size)
	}
	runtime.KeepAlive(c)
}
