package oidcgw

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/svc-dev/svc/internal/sharedkey"
	"github.com/svc-dev/svc/reason"
)

// A pending sign-in (provider, PKCE verifier, nonce, return_to, expiry)
// travels in the browser, sealed (AES-256-GCM) under the gateway's state
// key, with its state as additional data: a sealed sign-in opens only
// with the state it was minted for, and whoever holds it can neither
// read its verifier nor change any of it. An anonymous login therefore
// keeps nothing on the server. The callback records its state as used,
// until the sign-in's expiry, only once the code exchange and the ID
// token verified: a flood of logins, or of callbacks, adds nothing to any
// store, and each state is still answered once.
//
// With Redis, the replicas share the state key (Redis key
// svc:oidc:state-key, see package sharedkey), so a sign-in started on one
// completes on another; without it the key is this process's own.

// stateKeyName is the Redis key of the shared state key.
const stateKeyName = "svc:oidc:state-key"

const (
	// sealLabel derives the AES-256 key from the shared key, so that the
	// key serves this purpose alone.
	sealLabel = "svc oidc pending sign-in v1"
	// sealAD precedes the state in the additional data.
	sealAD = "svc oidc state v1\x00"
	// pendingVersion is the first byte of a sealed sign-in's plaintext.
	pendingVersion = 1
	// gcmNonceLen and gcmTagLen are AES-GCM's standard sizes.
	gcmNonceLen = 12
	gcmTagLen   = 16
	// pendingFixedLen is the plaintext but for the provider's name and
	// return_to: version, expiry, verifier, nonce, name length.
	pendingFixedLen = 1 + 8 + 2*stateLen + 2
)

// pending is a sign-in started by login and awaiting its callback.
type pending struct {
	Provider string
	ReturnTo string
	Verifier [stateLen]byte // the PKCE verifier, as base64url text
	Nonce    [stateLen]byte // the ID token's nonce, as base64url text
	Expires  time.Time      // whole seconds
}

func (p *pending) verifier() string { return base64.RawURLEncoding.EncodeToString(p.Verifier[:]) }
func (p *pending) nonce() string    { return base64.RawURLEncoding.EncodeToString(p.Nonce[:]) }

// newPending is a sign-in with a fresh verifier and nonce, to be
// completed by exp.
func newPending(provider, returnTo string, exp time.Time) pending {
	p := pending{Provider: provider, ReturnTo: returnTo, Expires: time.Unix(exp.Unix(), 0)}
	_, _ = rand.Read(p.Verifier[:]) // never fails (crypto/rand)
	_, _ = rand.Read(p.Nonce[:])
	return p
}

// marshal: version, expiry (Unix seconds), verifier, nonce, the name's
// length (2 bytes) and name, and return_to to the end.
func (p *pending) marshal() ([]byte, error) {
	if len(p.Provider) > 0xffff {
		return nil, errors.New("oidcgw: provider name too long for a pending sign-in")
	}
	b := make([]byte, 0, pendingFixedLen+len(p.Provider)+len(p.ReturnTo))
	b = append(b, pendingVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(p.Expires.Unix()))
	b = append(b, p.Verifier[:]...)
	b = append(b, p.Nonce[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(p.Provider)))
	b = append(b, p.Provider...)
	return append(b, p.ReturnTo...), nil
}

// unmarshalPending reads what marshal wrote; ok is false for anything
// else.
func unmarshalPending(b []byte) (pending, bool) {
	var p pending
	if len(b) < pendingFixedLen || b[0] != pendingVersion {
		return p, false
	}
	exp := binary.BigEndian.Uint64(b[1:])
	if exp > 1<<62 {
		return p, false
	}
	p.Expires = time.Unix(int64(exp), 0)
	copy(p.Verifier[:], b[9:])
	copy(p.Nonce[:], b[9+stateLen:])
	n := int(binary.BigEndian.Uint16(b[9+2*stateLen:]))
	rest := b[pendingFixedLen:]
	if n > len(rest) {
		return p, false
	}
	p.Provider, p.ReturnTo = string(rest[:n]), string(rest[n:])
	return p, true
}

// newGCM is AES-GCM under key (32 bytes: AES-256), the AEAD of every
// sealed value of the gateway.
func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// pendingSealer seals and opens pending sign-ins under the state key.
type pendingSealer struct {
	keys sharedkey.Source

	mu   sync.Mutex
	from []byte // the shared key aead derives from
	aead cipher.AEAD
}

// cipher is the AEAD of the current shared key; it fails only when no
// key can be read.
func (s *pendingSealer) cipher(ctx context.Context) (cipher.AEAD, error) {
	k, err := s.keys.Key(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aead != nil && bytes.Equal(k, s.from) {
		return s.aead, nil
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(sealLabel))
	aead, err := newGCM(m.Sum(nil))
	if err != nil {
		return nil, err
	}
	s.from, s.aead = bytes.Clone(k), aead
	return aead, nil
}

func sealAdditionalData(state string) []byte { return append([]byte(sealAD), state...) }

// seal returns p sealed for state, in base64url.
func (s *pendingSealer) seal(ctx context.Context, state string, p pending) (string, error) {
	aead, err := s.cipher(ctx)
	if err != nil {
		return "", err
	}
	plain, err := p.marshal()
	if err != nil {
		return "", err
	}
	out := make([]byte, gcmNonceLen, gcmNonceLen+len(plain)+gcmTagLen)
	_, _ = rand.Read(out) // never fails (crypto/rand)
	out = aead.Seal(out, out, plain, sealAdditionalData(state))
	return base64.RawURLEncoding.EncodeToString(out), nil
}

// open returns the sign-in sealed for state; ok is false when sealed is
// not one (another state's, altered, under another key, not base64url).
// err is set only when the key could not be read. Expiry is the
// caller's to check.
func (s *pendingSealer) open(ctx context.Context, state, sealed string) (p pending, ok bool, err error) {
	if len(sealed) > maxStateCookieLen {
		return p, false, nil
	}
	b, derr := base64.RawURLEncoding.DecodeString(sealed)
	if derr != nil || len(b) < gcmNonceLen+gcmTagLen+pendingFixedLen {
		return p, false, nil
	}
	aead, err := s.cipher(ctx)
	if err != nil {
		return p, false, err
	}
	plain, oerr := aead.Open(nil, b[:gcmNonceLen], b[gcmNonceLen:], sealAdditionalData(state))
	if oerr != nil {
		return p, false, nil
	}
	p, ok = unmarshalPending(plain)
	return p, ok, nil
}

// usedMargin keeps a used state recorded past its sign-in's expiry, for
// replicas whose clocks run behind the one that recorded it.
const usedMargin = time.Minute

// openPending returns the sign-in the state cookie holds sealed for
// state: refused as oidc-state-unknown when it does not open, has
// expired or its state was answered already.
func (g *Gateway) openPending(ctx context.Context, state, sealed string) (pending, error) {
	unknown := func() (pending, error) {
		return pending{}, refuse(reason.OIDCStateUnknown, "the sign-in has expired or was already completed; start again at %s", g.loginURL(""))
	}
	p, ok, err := g.sealer.open(ctx, state, sealed)
	if err != nil {
		return p, reason.Wrap(reason.OIDCStoreUnavailable, err, "the sign-in key could not be read")
	}
	if !ok || !g.now().Before(p.Expires) {
		return unknown()
	}
	used, err := g.store.Has(ctx, usedStateKey(state))
	if err != nil {
		return p, reason.Wrap(reason.OIDCStoreUnavailable, err, "the pending sign-in could not be looked up")
	}
	if used {
		return unknown()
	}
	return p, nil
}

// useState records state as answered until its sign-in expires; a state
// answered already (two callbacks at once) is refused.
func (g *Gateway) useState(ctx context.Context, state string, exp time.Time) error {
	mine, err := g.store.Lock(ctx, usedStateKey(state), max(exp.Sub(g.now()), 0)+usedMargin)
	if err != nil {
		return reason.Wrap(reason.OIDCStoreUnavailable, err, "the sign-in could not be recorded")
	}
	if !mine {
		return refuse(reason.OIDCStateUnknown, "the sign-in was already completed; start again at %s", g.loginURL(""))
	}
	return nil
}
