package token

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"
)

func TestCacheBoundAndEviction(t *testing.T) {
	const size = 256
	c := newCache(size)
	now := time.Unix(1_800_000_000, 0).UnixNano()
	skew := int64(30 * time.Second)
	live := times{exp: now + int64(time.Hour)}
	for i := range 10 * size {
		k := sha256.Sum256(fmt.Appendf(nil, "token-%d", i))
		c.put(&k, entry{times: live}, now, skew)
	}
	if n := c.size(); n > size+shardCount || n < size/2 {
		t.Fatalf("size = %d after 10x inserts, want about %d", n, size)
	}

	// An expired token is never stored.
	k := sha256.Sum256([]byte("expired"))
	c.put(&k, entry{times: times{exp: now - 31*int64(time.Second)}}, now, skew)
	if _, ok := c.get(&k); ok {
		t.Fatal("expired entry stored")
	}

	// In a full shard, expired entries are evicted before live ones.
	c = newCache(shardCount) // one entry per shard
	var a, b [sha256.Size]byte
	a[0], b[0] = 5, 5+shardCount // same shard
	c.put(&a, entry{times: times{exp: now}}, now, skew)
	later := now + int64(time.Minute)
	c.put(&b, entry{times: live}, later, skew)
	if _, ok := c.get(&a); ok {
		t.Fatal("expired entry kept over a new one")
	}
	if _, ok := c.get(&b); !ok {
		t.Fatal("new entry missing")
	}
}
