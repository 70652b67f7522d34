package jwks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/svc-dev/svc/engine/loopback"
)

// MaxDiscoverySize is the largest discovery document accepted, in bytes.
const MaxDiscoverySize = 256 << 10

// ErrIssuerMismatch is the error of a discovery document whose issuer is
// not the issuer URL it was fetched for (OpenID Connect Discovery 1.0
// §4.3): its keys are never used. Test for it with errors.Is.
var ErrIssuerMismatch = errors.New("discovery issuer mismatch")

// DiscoveryURL is where issuer's OpenID Connect discovery document lives:
// the issuer without a terminating "/", then
// "/.well-known/openid-configuration" (OpenID Connect Discovery 1.0 §4).
func DiscoveryURL(issuer string) string {
	return strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
}

// ParseDiscovery reads an OpenID Connect discovery document fetched for
// issuer and returns its jwks_uri. The document's issuer must equal issuer
// exactly (else the error wraps ErrIssuerMismatch and names both values),
// and jwks_uri must be an absolute https URL (http only on a loopback
// host).
func ParseDiscovery(body []byte, issuer string) (string, error) {
	var doc struct {
		Issuer  *string `json:"issuer"`
		JWKSURI *string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("discovery document: %w", err)
	}
	switch {
	case doc.Issuer == nil:
		return "", errors.New("discovery document: no issuer")
	case *doc.Issuer != issuer:
		return "", fmt.Errorf("%w: the document at %s names issuer %q, not %q", ErrIssuerMismatch, DiscoveryURL(issuer), *doc.Issuer, issuer)
	case doc.JWKSURI == nil || *doc.JWKSURI == "":
		return "", errors.New("discovery document: no jwks_uri")
	}
	u, err := url.Parse(*doc.JWKSURI)
	if err != nil {
		return "", fmt.Errorf("discovery document: jwks_uri: %w", withoutURL(err))
	}
	if !loopback.EndpointURL(u) {
		return "", fmt.Errorf("discovery document: jwks_uri %q must be an absolute https URL without credentials (http only on a loopback host)", redactURL(u))
	}
	return u.String(), nil
}

// discover fetches the discovery document of the issuer and returns its
// jwks_uri.
func (c *Cache) discover(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.FetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, DiscoveryURL(c.opts.IssuerURL), nil)
	if err != nil {
		return "", fmt.Errorf("discovery request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.opts.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("discovery fetch: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return "", fmt.Errorf("discovery fetch: endpoint answered status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxDiscoverySize+1))
	if err != nil {
		return "", fmt.Errorf("discovery fetch: read body: %w", withoutURL(err))
	}
	if len(body) > MaxDiscoverySize {
		return "", fmt.Errorf("discovery fetch: body exceeds %d bytes", MaxDiscoverySize)
	}
	return ParseDiscovery(body, c.opts.IssuerURL)
}
