package token

import (
	"crypto/sha256"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/digestcache"
	"github.com/svc-dev/svc/internal/testkit"
)

func TestCacheBoundAndEviction(t *testing.T) {
	const size = 256
	c := newCache(size)
	now := time.Unix(1_800_000_000, 0).UnixNano()
	skew := int64(30 * time.Second)
	live := times{exp: now + int64(time.Hour)}
	forever := now + int64(24*time.Hour)
	for i := range 10 * size {
		k := sha256.Sum256(fmt.Appendf(nil, "token-%d", i))
		c.put(&k, entry{times: live, until: forever}, now, skew, 0)
	}
	if n := c.size(); n > size+digestcache.Shards || n < size/2 {
		t.Fatalf("size = %d after 10x inserts, want about %d", n, size)
	}

	// An expired token is never stored.
	k := sha256.Sum256([]byte("expired"))
	c.put(&k, entry{times: times{exp: now - 31*int64(time.Second)}, until: forever}, now, skew, 0)
	if _, ok := c.get(&k); ok {
		t.Fatal("expired entry stored")
	}

	// In a full shard, expired entries are evicted before live ones.
	c = newCache(digestcache.Shards) // one entry per shard
	var a, b [sha256.Size]byte
	a[0], b[0] = 5, 5+digestcache.Shards // same shard
	c.put(&a, entry{times: times{exp: now}, until: forever}, now, skew, 0)
	later := now + int64(time.Minute)
	c.put(&b, entry{times: live, until: forever}, later, skew, 0)
	if _, ok := c.get(&a); ok {
		t.Fatal("expired entry kept over a new one")
	}
	if _, ok := c.get(&b); !ok {
		t.Fatal("new entry missing")
	}
}

func TestCachePutAfterRetainIsRefused(t *testing.T) {
	c := newCache(64)
	now := time.Unix(1_800_000_000, 0).UnixNano()
	e := entry{times: times{exp: now + int64(time.Hour)}, until: now + int64(time.Minute), kid: "k1"}
	k := sha256.Sum256([]byte("token"))
	epoch := c.epoch()
	// The key set changed while the token was being verified.
	if n := c.retain(func(string, [sha256.Size]byte) bool { return false }); n != 0 {
		t.Fatalf("retain dropped %d entries of an empty cache", n)
	}
	c.put(&k, e, now, 0, epoch)
	if _, ok := c.get(&k); ok {
		t.Fatal("an entry verified before the key set changed was stored after it")
	}
	c.put(&k, e, now, 0, c.epoch())
	if _, ok := c.get(&k); !ok {
		t.Fatal("an entry of the current epoch was not stored")
	}
	// An entry already past its lifetime cap is not stored.
	k2 := sha256.Sum256([]byte("token-2"))
	old := e
	old.until = now - 1
	c.put(&k2, old, now, 0, c.epoch())
	if _, ok := c.get(&k2); ok {
		t.Fatal("an entry past its lifetime was stored")
	}
}

// The verified-token cache at the sidecar's default size, full and then
// taking many times its size in new tokens, keeps the live heap it had
// when it filled (measured after collection, not timed).
func TestCacheHeapFlatOnceFull(t *testing.T) {
	const size = 20_000
	c := newCache(size)
	now := time.Unix(1_800_000_000, 0).UnixNano()
	live := times{exp: now + int64(time.Hour)}
	i := 0
	put := func(n int) {
		for range n {
			k := sha256.Sum256(fmt.Appendf(nil, "token-%d", i))
			claims := Claims{"sub": fmt.Sprintf("u%07d", i), "tenant_id": fmt.Sprintf("t%04d", i%5000)}
			c.put(&k, entry{claims: claims, times: live, until: now + int64(time.Minute), kid: "k1"}, now, 0, c.epoch())
			i++
		}
	}
	testkit.HeapFlatOnceFull(t, size, put)
	if n := c.size(); n > size+digestcache.Shards {
		t.Fatalf("%d entries in a cache of %d", n, size)
	}
	runtime.KeepAlive(c)
}
