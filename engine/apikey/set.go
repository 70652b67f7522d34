package apikey

import (
	"crypto/sha256"
	"crypto/subtle"
	"time"

	"github.com/svc-dev/svc/reason"
)

// Set is a parsed key file. It is never modified once parsed, so one
// Set serves concurrent verifications.
type Set struct {
	keys  map[string]*Key
	order []*Key
}

// Len is the number of keys in s.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.order)
}

// Keys returns the entries in the file's order. They must not be
// modified.
func (s *Set) Keys() []*Key {
	if s == nil {
		return nil
	}
	return s.order
}

// Verify returns the entry of key when key is one of s, unrevoked and
// unexpired at now. Otherwise the code says why: reason.APIKeyMalformed
// for a string not shaped as a key, reason.APIKeyUnknown for an unknown
// id or a wrong secret alike (a caller cannot tell which ids exist),
// reason.APIKeyRevoked and reason.APIKeyExpired for a key whose secret
// matched.
func (s *Set) Verify(key string, now time.Time) (*Key, reason.Code) {
	id, ok := Split(key)
	if !ok {
		return nil, reason.APIKeyMalformed
	}
	var k *Key
	if s != nil {
		k = s.keys[id]
	}
	// Split checked the length: the copy spares the conversion's
	// allocation.
	var buf [keyLen]byte
	copy(buf[:], key)
	sum := sha256.Sum256(buf[:])
	if k == nil {
		// Hash and compare anyway, so that an unknown id costs what a
		// wrong secret does.
		subtle.ConstantTimeCompare(sum[:], absent[:])
		return nil, reason.APIKeyUnknown
	}
	if subtle.ConstantTimeCompare(sum[:], k.hash[:]) != 1 {
		return nil, reason.APIKeyUnknown
	}
	switch {
	case k.Revoked:
		return nil, reason.APIKeyRevoked
	case !k.Expires.IsZero() && !now.Before(k.Expires):
		return nil, reason.APIKeyExpired
	}
	return k, reason.OK
}

var absent [sha256.Size]byte
