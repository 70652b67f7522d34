package oidcgw

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store keeps short-lived values: pending sign-ins (by state). The
// memory store serves one process; the Redis store is shared by replicas.
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

// MaxPendingSignIns bounds the pending sign-ins a gateway without Redis
// keeps in memory. They are kept apart from what the gateway must not
// lose (revocations, refresh tokens), since anyone can start a sign-in:
// a flood of logins pushes out the oldest pending sign-ins, never a
// logout.
const MaxPendingSignIns = 100_000

// errStoreFull is returned by the memory store at maxMemoryEntries.
var errStoreFull = errors.New("oidcgw: memory store full")

// MemoryStore is a Store in this process's memory.
type MemoryStore struct {
	mu  sync.Mutex
	m   map[string]memoryEntry
	now func() time.Time
	max int
	// evict: at max, Put pushes out the oldest entry instead of
	// refusing; order holds the keys in the order they were put.
	evict bool
	order []queued
	seq   uint64
}

// queued is a key of an evicting store, as of its put numbered seq.
type queued struct {
	key string
	seq uint64
}

type memoryEntry struct {
	v   []byte
	exp time.Time
	seq uint64 // of its put, in an evicting store
}

// NewMemoryStore returns an empty MemoryStore; now defaults to time.Now.
func NewMemoryStore(now func() time.Time) *MemoryStore {
	if now == nil {
		now = time.Now
	}
	return &MemoryStore{m: map[string]memoryEntry{}, now: now, max: maxMemoryEntries}
}

// newEvictingStore returns an empty MemoryStore of at most max entries
// that pushes out the oldest to take a new one: for values of one
// lifetime (the pending sign-ins), where the oldest is also the first to
// expire.
func newEvictingStore(now func() time.Time, max int) *MemoryStore {
	s := NewMemoryStore(now)
	s.max, s.evict = max, true
	return s
}

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, key string, value []byte, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.evict {
		s.putEvicting(key, memoryEntry{v: value, exp: now.Add(ttl)})
		return nil
	}
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

// putEvicting stores e under key, pushing out the oldest entries while
// the store is full. An entry taken or put again since stays in order,
// stale, until it reaches the front or order, grown to twice the
// entries, is rebuilt: a put costs O(1) amortized, whatever the load.
func (s *MemoryStore) putEvicting(key string, e memoryEntry) {
	if _, ok := s.m[key]; !ok {
		for len(s.m) >= s.max && len(s.order) > 0 {
			old := s.order[0]
			s.order = s.order[1:]
			if s.m[old.key].seq == old.seq {
				delete(s.m, old.key)
			}
		}
	}
	s.seq++
	e.seq = s.seq
	s.m[key] = e
	s.order = append(s.order, queued{key, e.seq})
	if len(s.order) > 2*max(len(s.m), 1024) {
		live := make([]queued, 0, len(s.m))
		for _, q := range s.order {
			if s.m[q.key].seq == q.seq {
				live = append(live, q)
			}
		}
		s.order = live
	}
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
