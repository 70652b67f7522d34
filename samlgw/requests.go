package samlgw

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"strings"
	"time"

	"github.com/svc-dev/svc/internal/sharedkey"
)

// AuthnRequest ids carry their own proof of origin, so that an anonymous
// GET {prefix}/login keeps no state on the server: an id is "id-" and the
// base64url of a random nonce, its expiry (Unix seconds) and an
// HMAC-SHA256 of both under the gateway's request key. The ACS checks the
// MAC and the expiry; an id that has been answered is then remembered in
// the replay store until it expires, so each request is answered once.
// Only a response whose signature verified gets that far, so a flood of
// logins adds nothing to any store.
const (
	requestIDPrefix = "id-"
	nonceLen        = 16
	macLen          = 16
	requestIDLen    = nonceLen + 8 + macLen
	macLabel        = "svc saml request id v1\x00"
)

// requestKeyName is the Redis key that holds the request key shared by
// replicas (created by the first replica that needs it).
const requestKeyName = "svc:saml:request-key"

// requestIDs mints and checks AuthnRequest ids.
type requestIDs struct {
	keys sharedkey.Source
	now  func() time.Time
	ttl  time.Duration
}

func requestMAC(key, nonceAndExp []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(macLabel))
	m.Write(nonceAndExp)
	return m.Sum(nil)[:macLen]
}

// mint returns a new request id valid for ttl.
func (r *requestIDs) mint(ctx context.Context) (string, error) {
	key, err := r.keys.Key(ctx)
	if err != nil {
		return "", err
	}
	b := make([]byte, requestIDLen)
	if _, err := rand.Read(b[:nonceLen]); err != nil {
		return "", err
	}
	binary.BigEndian.PutUint64(b[nonceLen:], uint64(r.now().Add(r.ttl).Unix()))
	copy(b[nonceLen+8:], requestMAC(key, b[:nonceLen+8]))
	return requestIDPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// verify reports whether id was minted by this gateway (or a replica
// sharing its key) and is not past its expiry plus skew, and returns that
// expiry. err is set only when the key could not be read.
func (r *requestIDs) verify(ctx context.Context, id string, skew time.Duration) (time.Time, bool, error) {
	raw, ok := strings.CutPrefix(id, requestIDPrefix)
	if !ok {
		return time.Time{}, false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil || len(b) != requestIDLen {
		return time.Time{}, false, nil
	}
	key, err := r.keys.Key(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	if !hmac.Equal(b[nonceLen+8:], requestMAC(key, b[:nonceLen+8])) {
		return time.Time{}, false, nil
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(b[nonceLen:])), 0)
	if !r.now().Before(exp.Add(skew)) {
		return exp, false, nil
	}
	return exp, true, nil
}
