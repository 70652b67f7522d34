// Package introspect asks an OAuth 2.0 authorization server about opaque
// access tokens (RFC 7662 token introspection) and remembers its answers.
//
// A Client posts token=<token>&token_type_hint=access_token to the
// endpoint with client_secret_basic authentication, reads at most
// MaxAnswerSize bytes of the answer, and keeps what it learns in two
// tiers: a bounded in-process cache, then (Options.Remote) a store the
// replicas share, both keyed by the SHA-256 of the token, never the token.
// A value of the shared tier carries an HMAC-SHA256 over its key and
// content, under a key derived (HKDF) from the client secret: a value
// that fails it is ignored as a miss (Stats.RemoteRejected), so one who
// can write to the store without knowing the secret cannot make an
// answer.
// An active answer is kept Options.CacheTTL and never past the token's
// exp, an inactive one Options.NegativeTTL. Concurrent lookups of one
// token make one call. When the endpoint cannot be asked, an active
// answer whose token has not expired is served from the in-process cache.
//
// Failures carry a stable reason code (package reason): token-inactive,
// introspection-unavailable, introspection-invalid.
package introspect

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sync/singleflight"

	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/reason"
)

// Defaults of Options.
const (
	DefaultCacheTTL    = 5 * time.Minute
	DefaultNegativeTTL = 10 * time.Second
	DefaultCacheSize   = 10000
	DefaultTimeout     = 5 * time.Second
	DefaultTenantClaim = "tenant_id"
	DefaultSkew        = 30 * time.Second
)

// MaxTokenSize is the longest token sent to the endpoint; a longer one is
// token-malformed without a call.
const MaxTokenSize = 32 << 10

// Options configure a Client. URL is required.
type Options struct {
	// URL is the introspection endpoint.
	URL string
	// ClientID and ClientSecret authenticate the Client to the endpoint
	// (client_secret_basic).
	ClientID, ClientSecret string
	// TenantClaim names the member of an answer that holds the tenant;
	// default "tenant_id".
	TenantClaim string
	// CacheTTL is how long an active answer is served without asking
	// again, never past the token's exp; default 5m.
	CacheTTL time.Duration
	// NegativeTTL is how long an inactive answer is served; default 10s.
	NegativeTTL time.Duration
	// Skew is the clock difference tolerated for an answer's nbf: a
	// token whose nbf is further ahead than Skew counts as inactive
	// until then. Default 30s, as a JWT's (jwt.clock_skew).
	Skew time.Duration
	// CacheSize bounds the in-process cache (answers); default 10000.
	CacheSize int
	// Timeout bounds one call to the endpoint; default 5s.
	Timeout time.Duration
	// HTTPClient makes the calls; default http.DefaultClient. Its
	// CheckRedirect is replaced: a redirect is never followed.
	HTTPClient *http.Client
	// Remote is the second cache tier, shared by replicas; nil for none.
	Remote Remote
	// Derive, when set, computes a value from each active answer when it
	// is received (Answer.Derived), so that requests with the token
	// share it.
	Derive func(*Answer) any
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Client introspects tokens. It is safe for concurrent use.
type Client struct {
	opts   Options
	auth   string // the Authorization header
	macKey []byte // of the shared tier's values (remoteMACKey)
	mem    *cache
	group  singleflight.Group
	inact  *reason.Error
	counts counts

	// remote is the shared tier (a remoteBox), set by Options.Remote or
	// UseRemote.
	remote atomic.Pointer[remoteBox]

	mu      sync.Mutex
	lastErr string
	lastAt  time.Time
}

type counts struct {
	active, inactive, unavailable, invalid atomic.Uint64
	memoryHits, remoteHits, staleHits      atomic.Uint64
	remoteRejected                         atomic.Uint64
}

// New returns a Client for opts.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("introspection url %q is not an http(s) URL", opts.URL)
	}
	if opts.TenantClaim == "" {
		opts.TenantClaim = DefaultTenantClaim
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.NegativeTTL <= 0 {
		opts.NegativeTTL = DefaultNegativeTTL
	}
	if opts.Skew <= 0 {
		opts.Skew = DefaultSkew
	}
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	// A call carries the client's credentials and the token: following a
	// redirect would hand both to whatever the Location names (a 307 or
	// 308 resends the form), and trust that host's answer. A 3xx is
	// answered like any other status but 200.
	hc := *opts.HTTPClient
	hc.CheckRedirect = loopback.NoRedirect
	opts.HTTPClient = &hc
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Client{
		opts:   opts,
		macKey: remoteMACKey(opts.ClientSecret),
		mem:    newCache(opts.CacheSize),
		inact:  reason.New(reason.TokenInactive, "the token is not active"),
	}
	if opts.Remote != nil {
		c.remote.Store(&remoteBox{opts.Remote})
	}
	// RFC 6749 2.3.1: the id and secret are form-encoded before they are
	// joined for Basic authentication.
	req := &http.Request{Header: http.Header{}}
	req.SetBasicAuth(url.QueryEscape(opts.ClientID), url.QueryEscape(opts.ClientSecret))
	c.auth = req.Header.Get("Authorization")
	return c, nil
}

// Introspect returns the answer about the active token raw (without the
// "Bearer " prefix), from a cache when one holds it, else from the
// endpoint. Every error is a *reason.Error: token-inactive,
// introspection-unavailable, introspection-invalid or token-malformed.
// A call to the endpoint lasts at most Options.Timeout whoever waits for
// it; a caller whose ctx ends first stops waiting, with
// introspection-unavailable. The Answer and its Claims are shared: treat
// them as read-only.
func (c *Client) Introspect(ctx context.Context, raw string) (*Answer, error) {
	if raw == "" || len(raw) > MaxTokenSize {
		return nil, reason.New(reason.TokenMalformed, "token empty or over %d bytes", MaxTokenSize)
	}
	key := digest(raw)
	if e, ok := c.mem.get(&key); ok && c.opts.Now().UnixNano() < e.fresh {
		c.counts.memoryHits.Add(1)
		if e.answer == nil {
			return nil, c.inact
		}
		return e.answer, nil
	}
	return c.await(ctx, key, raw)
}

// await answers a token the in-process cache holds no fresh answer for,
// from the one lookup of it in flight (started when none is), for as
// long as ctx lasts. key is a copy: the lookup's goroutine keeps it, and
// the cache hits of Introspect do not allocate.
func (c *Client) await(ctx context.Context, key [sha256.Size]byte, raw string) (*Answer, error) {
	ch := c.group.DoChan(string(key[:]), func() (any, error) {
		// One call serves every waiter: one caller's cancellation must
		// not fail the others.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.Timeout)
		defer cancel()
		return c.lookup(cctx, &key, raw)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Answer), nil
	case <-ctx.Done():
		// The request is over (the proxy's timeout, a client gone): it
		// stops waiting, and the call goes on for the others.
		return nil, reason.Wrap(reason.IntrospectionUnavailable, ctx.Err(), "the request ended before the introspection endpoint answered")
	}
}

// lookup answers a token the in-process cache holds no fresh answer for:
// from the shared tier, else from the endpoint, else (the endpoint
// failing) from a still-usable cached answer.
func (c *Client) lookup(ctx context.Context, key *[sha256.Size]byte, raw string) (*Answer, error) {
	id := remoteKey(key)
	var remote Remote
	if box := c.remote.Load(); box != nil {
		remote = box.r
	}
	if remote != nil {
		if e, ok := c.fromRemote(ctx, remote, id); ok {
			c.counts.remoteHits.Add(1)
			c.mem.put(key, e, c.opts.Now().UnixNano())
			if e.answer == nil {
				return nil, c.inact
			}
			return e.answer, nil
		}
	}
	body, err := c.call(ctx, raw)
	var a *Answer
	if err == nil {
		a, err = parse(body, c.opts.TenantClaim)
	}
	now := c.opts.Now()
	if err != nil {
		c.failed(reason.Of(err, reason.IntrospectionUnavailable), err, now)
		if e, ok := c.mem.get(key); ok && e.answer != nil && now.UnixNano() < e.usable {
			c.counts.staleHits.Add(1)
			return e.answer, nil
		}
		return nil, err
	}
	e := c.entry(a, now.UnixNano())
	if e.answer == nil {
		c.counts.inactive.Add(1)
	} else {
		c.counts.active.Add(1)
	}
	c.mem.put(key, e, now.UnixNano())
	if remote != nil && e.fresh > now.UnixNano() {
		// A failing shared tier costs the replicas a call each, nothing
		// more: the answer is in hand.
		_ = remote.Set(ctx, id, encodeRemote(c.macKey, id, e.fresh, body), time.Duration(e.fresh-now.UnixNano()))
	}
	if e.answer == nil {
		return nil, c.inact
	}
	return e.answer, nil
}

// entry is the cache entry of answer a (nil: inactive) received at now.
// An active answer whose exp has passed is taken for an inactive one,
// and so is one whose nbf is more than Options.Skew ahead, until then:
// the token may not be used yet.
func (c *Client) entry(a *Answer, now int64) entry {
	if a != nil && a.Exp > 0 && unixNanos(a.Exp) <= now {
		a = nil
	}
	if a != nil && a.NotBefore > 0 {
		if valid := unixNanos(a.NotBefore) - int64(c.opts.Skew); valid > now {
			until := min(now+int64(c.opts.NegativeTTL), valid)
			return entry{fresh: until, usable: until}
		}
	}
	if a == nil {
		until := now + int64(c.opts.NegativeTTL)
		return entry{fresh: until, usable: until}
	}
	if c.opts.Derive != nil {
		a.Derived = c.opts.Derive(a)
	}
	fresh := now + int64(c.opts.CacheTTL)
	usable := fresh
	if a.Exp > 0 {
		usable = unixNanos(a.Exp)
		fresh = min(fresh, usable)
	}
	return entry{answer: a, fresh: fresh, usable: usable}
}

// unixNanos is the NumericDate sec (positive) in Unix nanoseconds, the
// largest int64 for a date past 2262, which nanoseconds cannot hold: a
// product that wrapped would put a far exp or nbf in the past.
func unixNanos(sec int64) int64 {
	if sec > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64
	}
	return sec * int64(time.Second)
}

// fromRemote reads the shared tier: ok when it holds a fresh answer that
// this deployment's replicas wrote (its MAC verifies) and that parses.
func (c *Client) fromRemote(ctx context.Context, remote Remote, id string) (entry, bool) {
	v, found, err := remote.Get(ctx, id)
	if err != nil || !found {
		return entry{}, false
	}
	fresh, body, ok := decodeRemote(c.macKey, id, v)
	if !ok {
		c.counts.remoteRejected.Add(1)
		return entry{}, false
	}
	now := c.opts.Now().UnixNano()
	if now >= fresh {
		return entry{}, false
	}
	a, err := parse(body, c.opts.TenantClaim)
	if err != nil {
		return entry{}, false
	}
	e := c.entry(a, now)
	e.fresh = min(e.fresh, fresh)
	return e, true
}

// call posts raw to the endpoint and returns the body of its 200 answer.
func (c *Client) call(ctx context.Context, raw string) ([]byte, error) {
	form := "token=" + url.QueryEscape(raw) + "&token_type_hint=access_token"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opts.URL, strings.NewReader(form))
	if err != nil {
		return nil, reason.Wrap(reason.IntrospectionUnavailable, err, "introspection request")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", c.auth)
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		// The error names the URL, never the form that holds the token.
		return nil, reason.Wrap(reason.IntrospectionUnavailable, err, "introspection endpoint unreachable")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerSize+1))
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// The Location is not quoted: it is the endpoint's to choose.
		return nil, reason.New(reason.IntrospectionUnavailable, "introspection endpoint answered %d, a redirect, which is not followed", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, reason.New(reason.IntrospectionUnavailable, "introspection endpoint answered %d", resp.StatusCode)
	}
	if err != nil {
		return nil, reason.Wrap(reason.IntrospectionUnavailable, err, "introspection answer cut short")
	}
	return body, nil
}

func (c *Client) failed(code reason.Code, err error, now time.Time) {
	if code == reason.IntrospectionInvalid {
		c.counts.invalid.Add(1)
	} else {
		c.counts.unavailable.Add(1)
	}
	c.mu.Lock()
	c.lastErr, c.lastAt = err.Error(), now
	c.mu.Unlock()
}

type remoteBox struct{ r Remote }

// UseRemote makes r the shared tier from now on, in place of
// Options.Remote, for a store that is ready only after the Client was
// made.
func (c *Client) UseRemote(r Remote) {
	c.remote.Store(&remoteBox{r})
}

// Shared reports whether the Client has a shared tier.
func (c *Client) Shared() bool {
	box := c.remote.Load()
	return box != nil && box.r != nil
}

// Stats are a Client's counts since it was made.
type Stats struct {
	// Active, Inactive, Unavailable and Invalid count the calls to the
	// endpoint by outcome.
	Active, Inactive, Unavailable, Invalid uint64
	// MemoryHits and RemoteHits count the answers served by each cache
	// tier without a call; StaleHits the active answers served past
	// CacheTTL because the endpoint failed.
	MemoryHits, RemoteHits, StaleHits uint64
	// RemoteRejected counts the values of the shared tier ignored because
	// their MAC did not verify: written by one who does not know the
	// client secret, by a replica with another secret, or in another
	// format.
	RemoteRejected uint64
	// Entries is the size of the in-process cache.
	Entries int
}

// Stats returns the Client's counts.
func (c *Client) Stats() Stats {
	return Stats{
		Active: c.counts.active.Load(), Inactive: c.counts.inactive.Load(),
		Unavailable: c.counts.unavailable.Load(), Invalid: c.counts.invalid.Load(),
		MemoryHits: c.counts.memoryHits.Load(), RemoteHits: c.counts.remoteHits.Load(),
		StaleHits: c.counts.staleHits.Load(), RemoteRejected: c.counts.remoteRejected.Load(),
		Entries: c.mem.size(),
	}
}

// LastError is the last failure of a call to the endpoint and when it
// happened; "" when none failed.
func (c *Client) LastError() (string, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr, c.lastAt
}

// URL is the introspection endpoint.
func (c *Client) URL() string { return c.opts.URL }

// Forget drops what the in-process cache holds about raw.
func (c *Client) Forget(raw string) {
	key := digest(raw)
	c.mem.remove(&key)
}

// RemoteKeyPrefix starts the key of every answer in the shared tier; the
// rest is the hex SHA-256 of the token.
const RemoteKeyPrefix = "svc:introspect:"

// digest is the SHA-256 of raw, the key of both cache tiers. The hash
// only reads the bytes: aliasing the string spares a copy per lookup.
func digest(raw string) [sha256.Size]byte {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(raw), len(raw)))
}

func remoteKey(key *[sha256.Size]byte) string {
	return RemoteKeyPrefix + hex.EncodeToString(key[:])
}
