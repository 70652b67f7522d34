package oidcgw

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store keeps short-lived values: answered states, revocations, refresh
// tokens. The memory store serves one process; the Redis store is shared
// by replicas. A login adds nothing to it; a callback adds its state
// only once its ID token verified.
type Store interface {
	// Put records value under key for ttl.
	Put(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Take returns the value under key and removes it, at once, so that
	// only one caller ever gets it; nil when there is none.
	Take(ctx context.Context, key string) ([]byte, error)
	// Has reports whether key holds a value.
	Has(ctx context.Context, key string) (bool, error)
	// Get returns the value under key; nil when there is none.
	Get(ctx context.Context, key string) ([]byte, error)
	// Lock sets key for ttl unless it is set; it reports whether it did.
	Lock(ctx context.Context, key string, ttl time.Duration) (bool, error)
}

// maxMemoryEntries bounds the memory store; past it, Put sweeps expired
// entries and refuses when none could be freed.
const maxMemoryEntries = 100_000

// errStoreFull is returned by the memory store at maxMemoryEntries.
var errStoreFull = errors.New("oidcgw: memory store full")

// MemoryStore is a Store in this process's memory.
type MemoryStore struct {
	mu  sync.Mutex
	m   map[string]memoryEntry
	now func() time.Time
	max int
}

type memoryEntry struct {
	v   []byte
	exp time.Time
}

// NewMemoryStore returns an empty MemoryStore; now defaults to time.Now.
func NewMemoryStore(now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{m: map[string]memoryEntry{}, now: now, max: maxMemoryEntries}
}

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, key string, value []byte, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.m) >= s.max {
		for k, e := range s.m {
			if !now.Before(e.exp) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= s.max {
			return errStoreFull
		}
	}
	s.m[key] = memoryEntry{v: value, exp: now.Add(ttl)}
	return nil
}

// Take implements Store.
func (s *MemoryStore) Take(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	delete(s.m, key)
	if !ok || !s.now().Before(e.exp) {
		return nil, nil
	}
	return e.v, nil
}

// Has implements Store.
func (s *MemoryStore) Has(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	return ok && s.now().Before(e.exp), nil
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	if !ok || !s.now().Before(e.exp) {
		return nil, nil
	}
	return e.v, nil
}

// Lock implements Store.
func (s *MemoryStore) Lock(_ context.Context, key string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[key]; ok && s.now().Before(e.exp) {
		return false, nil
	}
	s.m[key] = memoryEntry{v: []byte{1}, exp: s.now().Add(ttl)}
	return true, nil
}

// RedisStore is a Store in Redis, shared by every replica that uses the
// same server.
type RedisStore struct {
	c *redis.Client
}

// NewRedisStore uses c; the caller closes it.
func NewRedisStore(c *redis.Client) *RedisStore { return &RedisStore{c: c} }

// Put implements Store.
func (s *RedisStore) Put(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return s.c.Set(ctx, key, value, ttl).Err()
}

// Take implements Store with GETDEL.
func (s *RedisStore) Take(ctx context.Context, key string) ([]byte, error) {
	v, err := s.c.GetDel(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

// Has implements Store.
func (s *RedisStore) Has(ctx context.Context, key string) (bool, error) {
	n, err := s.c.Exists(ctx, key).Result()
	return n > 0, err
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, key string) ([]byte, error) {
	v, err := s.c.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return v, err
}

// Lock implements Store with SET NX PX.
func (s *RedisStore) Lock(ctx context.Context, key string, ttl time.Duration) (bool, error) {
	return s.c.SetNX(ctx, key, 1, ttl).Result()
}
