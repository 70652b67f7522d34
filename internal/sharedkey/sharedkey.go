// Package sharedkey provides the secret keys with which the sign-in
// gateways protect what they hand to a browser and take back from it (a
// SAML request id, an OpenID Connect pending sign-in), so that an
// anonymous login keeps nothing on the server.
//
// With Redis, every replica that uses the same server shares one key,
// created by the first replica that needs it and re-read every Refresh,
// so a sign-in started on one replica completes on another. Without
// Redis the key is a random one of this process.
package sharedkey

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Source gives the current key.
type Source interface {
	// Key returns the current key, at least MinLen bytes. It fails only
	// when there is no key yet and none could be read or created.
	Key(ctx context.Context) ([]byte, error)
}

// MinLen is the least length of a key a Source returns.
const MinLen = 32

// Refresh is how often a replica re-reads a key kept in Redis, so that
// replicas agree again soon after Redis lost it.
const Refresh = 30 * time.Second

var (
	_ Source = Static(nil)
	_ Source = (*Redis)(nil)
)

// Static is a key of this process only.
type Static []byte

// NewStatic returns a random key of MinLen bytes.
func NewStatic() (Static, error) {
	k := make([]byte, MinLen)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

// Key implements Source.
func (k Static) Key(context.Context) ([]byte, error) { return k, nil }

// Redis is a key kept in Redis under one name, shared by every replica
// that uses the same server. The value is the hex of MinLen random bytes;
// the key is that text as it is stored.
type Redis struct {
	c    *redis.Client
	name string
	now  func() time.Time

	mu  sync.Mutex
	key []byte
	at  time.Time
}

// NewRedis returns the key under name in c's server; now defaults to
// time.Now. The caller closes c.
func NewRedis(c *redis.Client, name string, now func() time.Time) *Redis {
	if now == nil {
		now = time.Now
	}
	return &Redis{c: c, name: name, now: now}
}

// Key implements Source. Past Refresh it reads the key again, and keeps
// serving the one it knows while Redis cannot be reached.
func (k *Redis) Key(ctx context.Context) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil && k.now().Sub(k.at) < Refresh {
		return k.key, nil
	}
	key, err := k.load(ctx)
	if err != nil {
		if k.key != nil {
			return k.key, nil
		}
		return nil, err
	}
	k.key, k.at = key, k.now()
	return key, nil
}

// load reads the key, creating it first when there is none.
func (k *Redis) load(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, MinLen)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	if err := k.c.SetNX(ctx, k.name, hex.EncodeToString(fresh), 0).Err(); err != nil {
		return nil, err
	}
	v, err := k.c.Get(ctx, k.name).Result()
	if err != nil {
		return nil, err
	}
	if len(v) < MinLen {
		return nil, fmt.Errorf("sharedkey: the key in Redis under %s is too short", k.name)
	}
	return []byte(v), nil
}
