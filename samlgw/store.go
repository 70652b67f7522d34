package samlgw

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store remembers keys for a while: accepted assertion ids (replay) and
// pending AuthnRequest ids. The memory store serves one process; the
// Redis store is shared by replicas.
type Store interface {
	// Add records key for ttl; it reports false when key is already there.
	Add(ctx context.Context, key string, ttl time.Duration) (bool, error)
	// Take removes key and reports whether it was there.
	Take(ctx context.Context, key string) (bool, error)
}

// MaxMemoryEntries bounds the memory store; past it, Add sweeps expired
// entries and refuses when none could be freed.
const MaxMemoryEntries = 200_000

// ErrStoreFull is returned by the memory store at MaxMemoryEntries.
var ErrStoreFull = errors.New("samlgw: memory store full")

// MemoryStore is a Store in this process's memory.
type MemoryStore struct {
	mu  sync.Mutex
	m   map[string]time.Time
	now func() time.Time
}

// NewMemoryStore returns an empty MemoryStore; now defaults to time.Now.
func NewMemoryStore(now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{m: map[string]time.Time{}, now: now}
}

// Add implements Store.
func (s *MemoryStore) Add(_ context.Context, key string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if exp, ok := s.m[key]; ok && now.Before(exp) {
		return false, nil
	}
	if len(s.m) >= MaxMemoryEntries {
		for k, exp := range s.m {
			if !now.Before(exp) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= MaxMemoryEntries {
			return false, ErrStoreFull
		}
	}
	s.m[key] = now.Add(ttl)
	return true, nil
}

// Take implements Store.
func (s *MemoryStore) Take(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.m[key]
	delete(s.m, key)
	return ok && s.now().Before(exp), nil
}

// RedisStore is a Store in Redis, shared by every replica that uses the
// same server: SET NX PX records, DEL takes.
type RedisStore struct {
	c *redis.Client
}

// NewRedisStore uses c; the caller closes it.
func NewRedisStore(c *redis.Client) *RedisStore { return &RedisStore{c: c} }

// Add implements Store.
func (s *RedisStore) Add(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return s.c.SetNX(ctx, key, 1, ttl).Result()
}

// Take implements Store.
func (s *RedisStore) Take(ctx context.Context, key string) (bool, error) {
	n, err := s.c.Del(ctx, key).Result()
	return n == 1, err
}
