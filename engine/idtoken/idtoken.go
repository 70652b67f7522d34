// Package idtoken mints the identity tokens the sidecar hands the
// upstream of every allowed request (x-svc-identity): short-lived ES256
// JWTs naming the caller (sub, tenant_id, roles, kind), the upstream they
// are for (aud) and the decision that let the caller through
// (decision_id), so that the upstream can verify who was let in rather
// than trust plain headers.
//
// A token is reused for the same credential and audience while more than
// half of its lifetime is left, so that a caller's requests cost one
// signature per half-lifetime rather than one each; the reused token
// carries the decision_id of the decision that minted it.
//
// The keys come from a signing key file (issuer.ReadKeys): its first key
// signs, all of its keys are published (JWKS). The file is re-read when
// it changes (Watch) and on demand (Reload, on SIGHUP); a signing key
// that the new file no longer holds stays published until the last token
// it signed has expired.
package idtoken

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc-dev/svc/internal/periodic"

	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/wire"
)

// DefaultCacheSize bounds the tokens kept for reuse.
const DefaultCacheSize = 10000

// poll is how often the key file is checked for a change.
const poll = 2 * time.Second

// Options configures a Minter.
type Options struct {
	// KeyFile is the PEM signing key file (identity_token.signing_key_file).
	KeyFile string
	// TTL is the lifetime of a token (identity_token.ttl).
	TTL time.Duration
	// Issuer is the iss claim (the sidecar's service name).
	Issuer string
	// CacheSize bounds the tokens kept for reuse; default DefaultCacheSize.
	CacheSize int
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives reloads and refusals of the key file; default
	// slog.Default(). Key material is never logged.
	Logger *slog.Logger
}

// Claims are what a token says of one allowed request.
type Claims struct {
	// Subject is the caller (sub).
	Subject string
	// TenantID is the caller's tenant (tenant_id).
	TenantID string
	// Roles are the caller's roles (roles).
	Roles []string
	// Kind is the kind of credential that proved the identity (kind);
	// left out when empty.
	Kind string
	// Audience is the upstream the request goes to (aud); left out when
	// not known.
	Audience string
	// DecisionID is the decision that let the request through
	// (decision_id).
	DecisionID string
}

// Minter mints identity tokens. It is safe for concurrent use.
type Minter struct {
	opts  Options
	log   *slog.Logger
	keys  atomic.Pointer[keyState]
	cache *cache

	mu  sync.Mutex // serializes reloads
	sum [sha256.Size]byte

	minted, reused, failures, refusals atomic.Int64
	status                             atomic.Pointer[Status]
}

// keyState is the signing key in force and the keys published.
type keyState struct {
	keys issuer.Keys
	// retired are signing keys replaced by a reload, published until the
	// last token they signed has expired.
	retired []retiredKey
	// epoch changes with the signing key: a cached token of another epoch
	// is not reused.
	epoch uint64
}

type retiredKey struct {
	key   jwks.Key
	until time.Time
}

// Status describes the identity tokens for status endpoints.
type Status = wire.IdentityTokenStatus

// New reads the key file: a file that cannot be read or parsed refuses
// the start.
func New(opts Options) (*Minter, error) {
	if opts.KeyFile == "" {
		return nil, errors.New("idtoken: a signing key file is required")
	}
	if opts.TTL <= 0 {
		return nil, errors.New("idtoken: the token lifetime must be positive")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := &Minter{opts: opts, log: opts.Logger, cache: newCache(opts.CacheSize)}
	if _, err := m.reload(true); err != nil {
		return nil, err
	}
	return m, nil
}

// TTL is the lifetime of a token.
func (m *Minter) TTL() time.Duration { return m.opts.TTL }

// Token returns the token of c for the caller who presented credential
// (the bearer token or API key, as presented): the token minted for the
// same credential, audience and identity if more than half of its
// lifetime is left, else a new one.
func (m *Minter) Token(credential string, c Claims) (string, error) {
	ks := m.keys.Load()
	now := m.opts.Now()
	key := m.cache.key(credential, c.Audience)
	if tok, ok := m.cache.get(key, &c, ks.epoch, now.UnixNano()); ok {
		m.reused.Add(1)
		return tok, nil
	}
	tok, exp, err := m.mint(ks, c, now)
	if err != nil {
		m.failures.Add(1)
		return "", err
	}
	m.minted.Add(1)
	iat := now.Truncate(time.Second)
	m.cache.put(key, &c, ks.epoch, tok, iat.Add(exp.Sub(iat)/2).UnixNano(), now.UnixNano())
	return tok, nil
}

// payload is a token's claim set, in this order.
type payload struct {
	Issuer     string   `json:"iss,omitempty"`
	Subject    string   `json:"sub"`
	Audience   string   `json:"aud,omitempty"`
	TenantID   string   `json:"tenant_id"`
	Roles      []string `json:"roles"`
	Kind       string   `json:"kind,omitempty"`
	DecisionID string   `json:"decision_id"`
	IssuedAt   int64    `json:"iat"`
	NotBefore  int64    `json:"nbf"`
	Expiry     int64    `json:"exp"`
	ID         string   `json:"jti"`
}

func (m *Minter) mint(ks *keyState, c Claims, now time.Time) (string, time.Time, error) {
	now = now.Truncate(time.Second)
	exp := now.Add(m.opts.TTL)
	var jti [12]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("idtoken: jti: %w", err)
	}
	roles := c.Roles
	if roles == nil {
		roles = []string{}
	}
	body, err := json.Marshal(payload{
		Issuer: m.opts.Issuer, Subject: c.Subject, Audience: c.Audience, TenantID: c.TenantID,
		Roles: roles, Kind: c.Kind, DecisionID: c.DecisionID,
		IssuedAt: now.Unix(), NotBefore: now.Unix(), Expiry: exp.Unix(),
		ID: base64.RawURLEncoding.EncodeToString(jti[:]),
	})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("idtoken: encode claims: %w", err)
	}
	tok, err := issuer.Sign(ks.keys.Signer, ks.keys.KeyID, body)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("idtoken: %w", err)
	}
	return tok, exp, nil
}

// JWKS returns the published keys as a JSON Web Key Set document: every
// key of the file, then the replaced signing keys whose tokens may still
// be valid.
func (m *Minter) JWKS() ([]byte, error) {
	ks := m.keys.Load()
	now := m.opts.Now()
	keys := slices.Clone(ks.keys.Verify)
	for _, r := range ks.retired {
		if now.Before(r.until) {
			keys = append(keys, r.key)
		}
	}
	b, err := issuer.KeySet(keys)
	if err != nil {
		return nil, fmt.Errorf("idtoken: %w", err)
	}
	return b, nil
}

// Status returns the state of the keys and the counts of tokens.
func (m *Minter) Status() Status {
	s := *m.status.Load()
	ks := m.keys.Load()
	s.KeyID = ks.keys.KeyID
	s.Published = len(ks.keys.Verify)
	now := m.opts.Now()
	for _, r := range ks.retired {
		if now.Before(r.until) {
			s.Published++
		}
	}
	s.Minted, s.Reused, s.Failures, s.Refusals = m.minted.Load(), m.reused.Load(), m.failures.Load(), m.refusals.Load()
	return s
}

// Counts returns the tokens minted and reused, and the signing failures,
// since the start (for metrics).
func (m *Minter) Counts() (minted, reused, failures int64) {
	return m.minted.Load(), m.reused.Load(), m.failures.Load()
}

// Watch re-reads the key file when it changes, until ctx ends.
func (m *Minter) Watch(ctx context.Context) {
	periodic.Every(ctx, poll, func() { _, _ = m.Reload() })
}

// Reload re-reads the key file now and reports whether its keys changed.
// A file that cannot be read or parsed is refused: the error is logged,
// counted and shown in Status, and the previous keys stay in force.
func (m *Minter) Reload() (bool, error) {
	return m.reload(false)
}

func (m *Minter) reload(first bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, err := os.ReadFile(m.opts.KeyFile)
	var ks issuer.Keys
	if err == nil {
		sum := sha256.Sum256(data)
		if !first && sum == m.sum {
			return false, nil
		}
		m.sum = sum
		signer, pubs, perr := issuer.ParseKeys(data)
		if perr == nil {
			ks, err = issuer.KeysOf(signer, pubs)
		} else {
			err = perr
		}
	}
	if err != nil {
		err = fmt.Errorf("idtoken: signing key file %s: %w", m.opts.KeyFile, err)
		if first {
			return false, err
		}
		m.refusals.Add(1)
		st := *m.status.Load()
		st.LastError = err.Error()
		m.status.Store(&st)
		m.log.Error("identity token key file refused; the previous keys stay in force", "err", err)
		return false, err
	}
	now := m.opts.Now()
	next := &keyState{keys: ks}
	if prev := m.keys.Load(); prev != nil {
		next.epoch = prev.epoch + 1
		// Tokens signed until now by a key the file no longer holds stay
		// valid for at most one lifetime (plus the second iat is cut to).
		until := now.Add(m.opts.TTL + time.Second)
		for _, r := range prev.retired {
			if now.Before(r.until) && !holds(ks, r.key.ID) {
				next.retired = append(next.retired, r)
			}
		}
		for _, k := range prev.keys.Verify {
			if k.ID == prev.keys.KeyID && !holds(ks, k.ID) {
				next.retired = append(next.retired, retiredKey{key: k, until: until})
			}
		}
	}
	m.keys.Store(next)
	m.status.Store(&Status{KeyFile: m.opts.KeyFile, TTL: m.opts.TTL.String(), Loaded: now})
	if !first {
		m.log.Info("identity token keys reloaded", "file", m.opts.KeyFile, "kid", ks.KeyID)
	}
	return true, nil
}

func holds(ks issuer.Keys, kid string) bool {
	for _, k := range ks.Verify {
		if k.ID == kid {
			return true
		}
	}
	return false
}
