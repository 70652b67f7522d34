package jwks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
)

// fetch downloads, validates and installs the set, records the outcome in
// the status, and returns the refresh interval the response announces.
// A failed fetch, an unparseable body or a set without a usable key never
// replaces the set already loaded.
func (c *Cache) fetch(ctx context.Context) (time.Duration, error) {
	s, rejected, interval, err := c.download(ctx)
	now := c.opts.Now()
	c.logRejected(rejected)

	c.mu.Lock()
	c.st.Fetches++
	c.st.LastFetch = now
	if err != nil {
		c.st.FetchFailures++
		c.st.LastError = err.Error()
		enter := c.set.Load() != nil && !c.st.Partitioned
		if enter {
			c.st.Partitioned = true
			c.st.PartitionedSince = now
		}
		c.mu.Unlock()
		if enter {
			c.log.Warn("jwks fetch failed, serving cached keys", "error", err)
		} else if c.set.Load() == nil {
			c.log.Warn("jwks fetch failed; no copy yet, retrying (tokens are refused with jwks-unavailable until then)", "error", err)
		} else {
			c.log.Warn("jwks fetch failed", "error", err)
		}
		return interval, err
	}
	recovered := c.st.Partitioned
	old := c.set.Swap(s)
	changed := old != nil && !s.sameKeys(old)
	available := old == nil && c.st.FetchFailures > 0
	failures := c.st.FetchFailures
	c.st.LastSuccess = now
	c.st.LastError = ""
	c.st.Partitioned = false
	c.st.PartitionedSince = time.Time{}
	c.mu.Unlock()

	if recovered {
		c.log.Info("jwks reachable again")
	}
	if available {
		c.log.Info("jwks available; tokens can be verified", "keys", len(s.keys), "failed_fetches", failures)
	}
	if changed && c.opts.OnChange != nil {
		c.opts.OnChange()
	}
	c.log.Debug("jwks loaded", "keys", len(s.keys), "rejected", len(rejected), "next_refresh_in", interval.String())
	return interval, nil
}

// logRejected warns about keys that failed validation, once for as long as
// the provider keeps publishing the same ones.
func (c *Cache) logRejected(rejected []rejectedKey) {
	var b strings.Builder
	for _, r := range rejected {
		fmt.Fprintf(&b, "%q %s %q;", r.kid, r.code, r.why)
	}
	c.mu.Lock()
	same := b.String() == c.lastRejected
	c.lastRejected = b.String()
	c.mu.Unlock()
	if same {
		return
	}
	for _, r := range rejected {
		c.log.Warn("jwks key rejected", "kid", r.kid, "reason", string(r.code), "why", r.why)
	}
}

// download performs one GET of the set. It returns the validated set, the
// keys that failed validation and the refresh interval.
func (c *Cache) download(ctx context.Context) (*keySet, []rejectedKey, time.Duration, error) {
	if c.opts.IssuerURL != "" {
		uri, err := c.discover(ctx)
		if err != nil {
			return nil, nil, 0, err
		}
		c.setURL(uri)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *c.url.Load(), nil)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("jwks request: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := c.opts.Client.Do(req)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("jwks fetch: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		// Drain a little so that the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, nil, 0, fmt.Errorf("jwks fetch: endpoint answered status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodySize+1))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("jwks fetch: read body: %w", withoutURL(err))
	}
	if len(body) > MaxBodySize {
		return nil, nil, 0, fmt.Errorf("jwks fetch: body exceeds %d bytes", MaxBodySize)
	}
	// Entries jwx cannot parse (unknown kty, RSA under 2048 bits) are
	// kept as placeholders so that their kid is rejected with a reason
	// instead of failing the whole set.
	set, err := jwk.Parse(body, jwk.WithStrictKeySetParsing(false))
	if err != nil {
		return nil, nil, 0, fmt.Errorf("jwks fetch: parse: %w", err)
	}
	if set.Len() == 0 {
		return nil, nil, 0, errors.New("jwks fetch: set holds no keys")
	}
	s, rejected := buildKeySet(set, c.opts.Now())
	if len(s.keys) == 0 {
		return nil, rejected, 0, fmt.Errorf("jwks fetch: set holds no usable key (%d rejected)", len(rejected))
	}
	interval := refreshInterval(resp.Header.Values("Cache-Control"), c.opts.MinRefresh, c.opts.MaxRefresh)
	return s, rejected, interval, nil
}

// setURL makes uri, a discovery document's jwks_uri, the endpoint of
// this and later fetches.
func (c *Cache) setURL(uri string) {
	if old := c.url.Load(); old != nil && *old == uri {
		return
	}
	c.url.Store(&uri)
	shown := uri
	if u, err := url.Parse(uri); err == nil {
		shown = redactURL(u)
	}
	c.mu.Lock()
	prev := c.st.URL
	c.st.URL = shown
	c.mu.Unlock()
	if prev != "" {
		c.log.Info("jwks_uri changed in the discovery document", "from", prev, "to", shown)
	}
}

// withoutURL drops the URL that net/http puts in its errors: it may carry
// credentials or a query with secrets.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// refreshInterval reads max-age from Cache-Control and clamps it to
// [minimum, maximum]. Without max-age, or with no-cache/no-store, the
// interval is minimum.
func refreshInterval(cacheControl []string, minimum, maximum time.Duration) time.Duration {
	d := time.Duration(-1)
	for _, line := range cacheControl {
		for dir := range strings.SplitSeq(line, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(dir), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-cache", "no-store":
				return minimum
			case "max-age":
				if secs, ok := parseSeconds(strings.Trim(strings.TrimSpace(val), `"`)); ok {
					d = secs
				}
			}
		}
	}
	if d < minimum {
		return minimum
	}
	return min(d, maximum)
}

// parseSeconds parses a delta-seconds value (RFC 9111 §1.2.2). Values past
// 2^31 seconds are read as 2^31, as that section allows.
func parseSeconds(s string) (time.Duration, bool) {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n > 1<<31 {
		n = 1 << 31
	}
	return time.Duration(n) * time.Second, true
}
