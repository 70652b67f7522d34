package introspect

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Remote is the cache tier the replicas share. Keys start with
// RemoteKeyPrefix and hold no token; values are opaque to the store, and
// carry a MAC under a key derived from the client secret, so that one who
// can write to the store but does not know the secret cannot make an
// answer the Client takes.
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

// remoteKeyInfo labels the key of the shared tier's MACs, derived from
// the client secret: the secret itself signs nothing.
const remoteKeyInfo = "svc introspection shared cache v1"

// remoteMACKey is the key of the shared tier's MACs: HKDF-SHA256 of the
// client secret, which every replica has, under remoteKeyInfo.
func remoteMACKey(secret string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(secret), nil, remoteKeyInfo, sha256.Size)
	if err != nil {
		// HKDF-SHA256 refuses only keys over 255*32 bytes.
		panic("introspect: remote MAC key: " + err.Error())
	}
	return k
}

// remoteMAC is the HMAC-SHA256 under key of the value rest stored under
// id: the key is part of what is signed, so that the answer about one
// token cannot be moved under another's.
func remoteMAC(key []byte, id string, rest []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{0})
	m.Write(rest)
	return m.Sum(nil)
}

// encodeRemote is the shared tier's value under id of an answer: the hex
// HMAC (remoteMAC) of the rest, a newline, until when the answer is
// fresh (Unix nanoseconds), a newline, and the endpoint's body as it
// came.
func encodeRemote(key []byte, id string, fresh int64, body []byte) []byte {
	rest := strconv.AppendInt(make([]byte, 0, 20+1+len(body)), fresh, 10)
	rest = append(rest, '\n')
	rest = append(rest, body...)
	v := hex.AppendEncode(make([]byte, 0, 2*sha256.Size+1+len(rest)), remoteMAC(key, id, rest))
	v = append(v, '\n')
	return append(v, rest...)
}

// decodeRemote reads the value v stored under id; ok is false when its
// MAC is missing or does not verify under key (whoever wrote it did not
// know the key, or wrote another format) or it is not shaped as
// encodeRemote writes.
func decodeRemote(key []byte, id string, v []byte) (fresh int64, body []byte, ok bool) {
	tag, rest, found := bytes.Cut(v, []byte{'\n'})
	if !found || len(tag) != hex.EncodedLen(sha256.Size) {
		return 0, nil, false
	}
	var got [sha256.Size]byte
	if _, err := hex.Decode(got[:], tag); err != nil || !hmac.Equal(got[:], remoteMAC(key, id, rest)) {
		return 0, nil, false
	}
	head, body, found := bytes.Cut(rest, []byte{'\n'})
	if !found {
		return 0, nil, false
	}
	fresh, err := strconv.ParseInt(string(head), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return fresh, body, true
}
