package introspect

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Remote is the cache tier the replicas share. Keys start with
// RemoteKeyPrefix and hold no token; values are opaque to the store.
type Remote interface {
	// Get returns the value of key; found is false when there is none.
	Get(ctx context.Context, key string) (value []byte, found bool, err error)
	// Set stores value under key for ttl.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
}

// Redis is a Remote in Redis, each operation bounded by Timeout.
type Redis struct {
	Client  *redis.Client
	Timeout time.Duration
}

var _ Remote = Redis{}

// Get implements Remote.
func (r Redis) Get(ctx context.Context, key string) ([]byte, bool, error) {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	v, err := r.Client.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// Set implements Remote.
func (r Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	ctx, cancel := r.bound(ctx)
	defer cancel()
	return r.Client.Set(ctx, key, value, ttl).Err()
}

func (r Redis) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, r.Timeout)
}

// encodeRemote is the shared tier's value of an answer: until when it is
// fresh (Unix nanoseconds), a newline, and the endpoint's body as it came.
func encodeRemote(fresh int64, body []byte) []byte {
	v := strconv.AppendInt(make([]byte, 0, 20+len(body)), fresh, 10)
	v = append(v, '\n')
	return append(v, body...)
}

func decodeRemote(v []byte) (fresh int64, body []byte, ok bool) {
	head, body, found := bytes.Cut(v, []byte{'\n'})
	if !found {
		return 0, nil, false
	}
	fresh, err := strconv.ParseInt(string(head), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return fresh, body, true
}
