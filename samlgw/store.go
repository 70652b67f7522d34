package samlgw

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store remembers keys for a while: the ids of accepted assertions and of
// the AuthnRequests they answered (replay). Only a response whose
// signature verified writes to it; pending requests keep no state (see
// requestIDs). The memory store serves one process; the Redis store is
// shared by replicas.
type Store interface {
	// Add records key for ttl; it reports false when key is already there.
	Add(ctx context.Context, key string, ttl time.Duration) (bool, error)
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
	max int
}

// NewMemoryStore returns an empty MemoryStore; now defaults to time.Now.
func NewMemoryStore(now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{m: map[string]time.Time{}, now: now, max: MaxMemoryEntries}
}

// Add implements Store.
func (s *MemoryStore) Add(_ context.Context, key string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if exp, ok := s.m[key]; ok && now.Before(exp) {
		return false, nil
	}
	if len(s.m) >= s.max {
		for k, exp := range s.m {
			if !now.Before(exp) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= s.max {
			return false, ErrStoreFull
		}
	}
	s.m[key] = now.Add(ttl)
	return true, nil
}

// RedisStore is a Store in Redis, shared by every replica that uses the
// same server: SET NX PX records.
type RedisStore struct {
	c *redis.Client
}

// NewRedisStore uses c; the caller closes it.
func NewRedisStore(c *redis.Client) *RedisStore { return &RedisStore{c: c} }

// Add implements Store.
func (s *RedisStore) Add(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return s.c.SetNX(ctx, key, 1, ttl).Result()
}
