// Package jwks keeps the identity provider's JSON Web Key Set in memory so
// that tokens can be verified without I/O on the request path.
//
// A Cache fetches the set from one HTTPS URL, validates every key once when
// the set is loaded (RSA of 2048 bits or more and EC P-256 only, for RS256,
// PS256 and ES256 signatures), refreshes it in the background at the
// interval the provider announces through Cache-Control (bounded by
// Options.MinRefresh and Options.MaxRefresh), and refetches on demand when a
// token names a kid it does not know. On-demand refetches are
// singleflighted and rate-limited, so a flood of tokens with random kids
// cannot hammer the provider. When the provider is unreachable the keys
// already loaded keep serving and Status reports the cache as partitioned.
// Named by an OpenID Connect issuer instead (Options.IssuerURL), a Cache
// reads the issuer's discovery document before each fetch and takes the
// keys at its jwks_uri.
//
// The lifecycle is New → Run(ctx) (optional; without it the first Key call
// fetches lazily) → Key from any number of goroutines → Status.
package jwks

import (
	"context"
	"crypto"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"golang.org/x/sync/singleflight"

	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/reason"
)

// MaxBodySize is the largest JWKS response accepted, in bytes. A larger
// body is a failed fetch; the keys already loaded stay.
const MaxBodySize = 1 << 20

// Defaults applied by New to zero Options fields.
const (
	DefaultFetchTimeout       = 5 * time.Second
	DefaultMinRefresh         = time.Minute
	DefaultMaxRefresh         = time.Hour
	DefaultUnknownKIDInterval = time.Minute
	DefaultUnknownKIDBurst    = 3
)

// Options configures a Cache. URL or IssuerURL is required, not both.
type Options struct {
	// URL is the JWKS endpoint: https, or http on a loopback host.
	URL string
	// IssuerURL is an OpenID Connect issuer instead of URL: every fetch
	// first reads its discovery document (DiscoveryURL), whose issuer
	// must equal IssuerURL exactly (else the fetch fails with
	// ErrIssuerMismatch), then the keys at its jwks_uri. The document is
	// thus refreshed with the keys, and a jwks_uri that moves is
	// followed; while the document cannot be read, the keys already
	// loaded keep serving as for any failed fetch. https, or http on a
	// loopback host.
	IssuerURL string
	// Client performs the fetches. Default: a client with Go's default
	// transport that follows redirects only to https (or http on a
	// loopback host). Its Timeout, if any, applies on top of FetchTimeout.
	Client *http.Client
	// FetchTimeout bounds one fetch, from request to parsed body.
	// Default 5s.
	FetchTimeout time.Duration
	// MinRefresh and MaxRefresh clamp the background refresh interval
	// taken from the response's Cache-Control max-age; MinRefresh is used
	// when the response carries none. MinRefresh also caps the retry
	// backoff after a failed fetch. Defaults 1m and 1h.
	MinRefresh, MaxRefresh time.Duration
	// UnknownKIDInterval and UnknownKIDBurst rate-limit the refetches
	// triggered by Key (an unknown kid, or no set loaded yet): at most
	// UnknownKIDBurst fetches per UnknownKIDInterval. Defaults 1m and 3.
	UnknownKIDInterval time.Duration
	UnknownKIDBurst    int
	// Logger receives fetch outcomes and rejected keys; never key
	// material. Default: discard.
	Logger *slog.Logger
	// Now is the clock for timestamps and the refetch limiter. Default
	// time.Now.
	Now func() time.Time
	// OnChange, when set, is called after a fetched set replaced a loaded
	// one that held other keys (a kid added, withdrawn or given new material), so
	// that what was verified with a withdrawn key can be forgotten (see
	// Holds). It runs on the fetching goroutine and must not call Key.
	OnChange func()
}

// Key is a verification key accepted from the set. The algorithm is fixed
// by the JWK, never by a token: Algs holds the JWK's own alg when present;
// without one, an RSA key accepts RS256 and PS256 and a P-256 key ES256.
// A Key and its fields are shared and must not be modified.
type Key struct {
	// ID is the key's kid, "" when the JWK has none.
	ID string
	// JWK is the public key as published by the provider.
	JWK jwk.Key
	// Public is the raw public key (*rsa.PublicKey or *ecdsa.PublicKey),
	// exported once when the set was loaded.
	Public crypto.PublicKey
	// Algs lists the signature algorithms the key may verify.
	Algs []jwa.SignatureAlgorithm
	// Thumbprint is the key's RFC 7638 SHA-256 thumbprint: it tells two
	// keys published under the same kid apart.
	Thumbprint [sha256.Size]byte
}

// Allows reports whether the key may verify a signature made with alg.
func (k Key) Allows(alg jwa.SignatureAlgorithm) bool {
	for _, a := range k.Algs {
		if a == alg {
			return true
		}
	}
	return false
}

// Cache is a rotation-safe, concurrency-safe JWKS cache. Create it with New.
type Cache struct {
	opts    Options
	url     atomic.Pointer[string] // the JWKS endpoint; with IssuerURL, the last jwks_uri
	log     *slog.Logger
	set     atomic.Pointer[keySet]
	group   singleflight.Group
	limiter *bucket
	running atomic.Bool
	// run is Run's while it runs: the fetches under way join it, and Run
	// ends them when it returns and waits for them, so that nothing the
	// cache does outlives it.
	runMu sync.Mutex
	run   *runState

	mu           sync.Mutex // guards st and lastRejected
	st           Status
	lastRejected string // the rejections last logged
}

// Status describes the cache for `sidecar status` and metrics.
type Status struct {
	// URL is the JWKS endpoint: with Options.IssuerURL, the jwks_uri of
	// the last discovery document read ("" before the first).
	URL string
	// Issuer is Options.IssuerURL, "" without discovery.
	Issuer string
	// KeySets is the number of key sets cached: 0 before the first
	// successful fetch, then 1.
	KeySets int
	// Keys is the number of usable keys in the cached set.
	Keys int
	// Rejected is the number of keys of the cached set that failed
	// validation (weak, wrong type or algorithm).
	Rejected int
	// LastFetch is when the last fetch attempt ended.
	LastFetch time.Time
	// LastSuccess is when the cached set was fetched.
	LastSuccess time.Time
	// LastError is the error of the last fetch, "" when it succeeded.
	LastError string
	// Partitioned is true when the last fetch failed while keys are cached:
	// they keep serving. PartitionedSince is the first failure of that run.
	Partitioned      bool
	PartitionedSince time.Time
	// Fetches counts fetch attempts; FetchFailures the failed ones.
	Fetches       uint64
	FetchFailures uint64
	// KeyAge is how old the cached set is (zero when none is cached).
	KeyAge time.Duration
	// NextRefresh is when Run will fetch next (zero when Run is not
	// running).
	NextRefresh time.Time
}

// New validates opts, fills defaults and returns a Cache that has fetched
// nothing yet.
func New(opts Options) (*Cache, error) {
	raw := opts.URL
	switch {
	case opts.URL != "" && opts.IssuerURL != "":
		return nil, errors.New("jwks: url and issuer url are exclusive")
	case opts.IssuerURL != "":
		raw = opts.IssuerURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("jwks: invalid url: %w", err)
	}
	switch {
	case u.Host == "":
		return nil, errors.New("jwks: url must be absolute with a host")
	case loopback.SecureURL(u):
	default:
		return nil, fmt.Errorf("jwks: url scheme %q not allowed: use https (http only on a loopback host)", u.Scheme)
	}
	if opts.Client == nil {
		opts.Client = &http.Client{CheckRedirect: loopback.CheckRedirect}
	}
	if opts.FetchTimeout == 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.MinRefresh == 0 {
		opts.MinRefresh = DefaultMinRefresh
	}
	if opts.MaxRefresh == 0 {
		opts.MaxRefresh = DefaultMaxRefresh
	}
	if opts.UnknownKIDInterval == 0 {
		opts.UnknownKIDInterval = DefaultUnknownKIDInterval
	}
	if opts.UnknownKIDBurst == 0 {
		opts.UnknownKIDBurst = DefaultUnknownKIDBurst
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch {
	case opts.FetchTimeout < 0, opts.MinRefresh < 0, opts.MaxRefresh < 0, opts.UnknownKIDInterval < 0:
		return nil, errors.New("jwks: durations must be positive")
	case opts.MinRefresh > opts.MaxRefresh:
		return nil, fmt.Errorf("jwks: min refresh %s exceeds max refresh %s", opts.MinRefresh, opts.MaxRefresh)
	case opts.UnknownKIDBurst < 0:
		return nil, errors.New("jwks: unknown-kid burst must be positive")
	}
	c := &Cache{
		opts:    opts,
		log:     opts.Logger.With("component", "jwks"),
		limiter: newBucket(opts.UnknownKIDBurst, opts.UnknownKIDInterval, opts.Now()),
	}
	if opts.IssuerURL != "" {
		c.st.Issuer = opts.IssuerURL
		c.log = c.log.With("issuer", opts.IssuerURL)
	} else {
		s := u.String()
		c.url.Store(&s)
		c.st.URL = redactURL(u)
	}
	return c, nil
}

// Key returns the verification key named kid. A known kid is answered from
// memory. An unknown kid triggers one refetch (shared by concurrent callers
// and rate-limited); if the kid is still unknown the error carries
// reason.UnknownKID. A kid whose key was rejected when the set was loaded
// yields reason.KeyTooWeak or reason.AlgNotAllowed. When no set was ever
// loaded and the fetch fails, the error carries reason.JWKSUnavailable. An
// empty kid selects the set's only usable key, if it holds exactly one.
// Every error is a *reason.Error.
func (c *Cache) Key(ctx context.Context, kid string) (Key, error) {
	s := c.set.Load()
	if s == nil {
		err := c.refetch(ctx)
		if s = c.set.Load(); s == nil {
			if errors.Is(err, errRateLimited) {
				c.mu.Lock()
				err = fmt.Errorf("%w; last fetch: %s", err, c.st.LastError)
				c.mu.Unlock()
			}
			return Key{}, reason.Wrap(reason.JWKSUnavailable, err, "no key set loaded")
		}
	}
	if k, found, err := s.lookup(kid); found {
		return k, err
	}
	if kid == "" {
		return Key{}, reason.New(reason.UnknownKID, "token names no kid and the key set holds %d usable keys", len(s.keys))
	}
	// An unknown kid may mean the provider rotated keys: look again once.
	// A failed or refused refetch keeps the old set, so the lookup below
	// decides either way.
	err := c.refetch(ctx)
	if k, found, kerr := c.set.Load().lookup(kid); found {
		return k, kerr
	}
	return Key{}, reason.Wrap(reason.UnknownKID, err, "kid not found in the key set")
}

// Holds reports whether the key set loaded now holds the key with this kid
// and thumbprint (for an empty kid: as its only usable key). It never
// fetches.
func (c *Cache) Holds(kid string, thumbprint [sha256.Size]byte) bool {
	s := c.set.Load()
	if s == nil {
		return false
	}
	k, found, err := s.lookup(kid)
	return found && err == nil && k.Thumbprint == thumbprint
}

// errRateLimited means an on-demand refetch was refused by the limiter.
var errRateLimited = errors.New("jwks refetch rate-limited")

// refetch performs an on-demand fetch, shared with any fetch in flight
// and subject to the unknown-kid limiter. The caller may stop waiting when
// ctx ends; the fetch itself runs to its own timeout so that the other
// waiters still get its result.
func (c *Cache) refetch(ctx context.Context) error {
	ch := c.group.DoChan("fetch", func() (any, error) {
		if !c.limiter.allow(c.opts.Now()) {
			return time.Duration(0), errRateLimited
		}
		return c.flight(ctx)
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Status returns a snapshot of the cache's state.
func (c *Cache) Status() Status {
	c.mu.Lock()
	st := c.st
	c.mu.Unlock()
	if s := c.set.Load(); s != nil {
		st.KeySets = 1
		st.Keys = len(s.keys)
		st.Rejected = s.nrejected
		st.KeyAge = c.opts.Now().Sub(s.fetched)
	}
	return st
}

// redactURL drops credentials and the query, which may carry secrets, from
// the URL shown in Status.
func redactURL(u *url.URL) string {
	r := *u
	r.User = nil
	r.RawQuery = ""
	r.Fragment = ""
	return r.String()
}

// runState is one Run: its context and the fetches it waits for.
type runState struct {
	ctx     context.Context
	flights sync.WaitGroup
}

// flight runs one fetch for every waiter of the shared flight: it goes on
// when the caller that started it stops waiting (ctx's cancellation is
// dropped) and ends when Run returns.
func (c *Cache) flight(ctx context.Context) (time.Duration, error) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	c.runMu.Lock()
	if r := c.run; r != nil {
		r.flights.Add(1)
		defer r.flights.Done()
		defer context.AfterFunc(r.ctx, cancel)()
	}
	c.runMu.Unlock()
	return c.fetch(fctx)
}
