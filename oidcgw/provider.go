package oidcgw

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/svc-dev/svc/internal/secretfile"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// discoveryRetry is how long a failed discovery is not tried again.
const discoveryRetry = 5 * time.Second

// provider is one OpenID provider: its configuration, and its discovery
// document and keys once fetched.
type provider struct {
	cfg      config.OIDCProvider
	redirect *url.URL
	secret   string
	// client reads the discovery document and the keys, following
	// redirects by loopback.CheckRedirect; tokenClient posts to the token
	// endpoint and follows none.
	client, tokenClient *http.Client
	now                 func() time.Time

	mu         sync.Mutex
	op         *oidc.Provider
	issuer     string // the discovery document's issuer
	issParam   bool   // authorization_response_iss_parameter_supported
	keys       *keySet
	algs       []string // id_token_signing_alg_values_supported, of signingAlgs
	endSession string
	at         time.Time // of the last attempt
	lastErr    error
}

func newProvider(pc config.OIDCProvider, client *http.Client, now func() time.Time) (*provider, error) {
	u, err := url.Parse(pc.RedirectURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("redirect_url %q is not an absolute URL", pc.RedirectURL)
	}
	var secret string
	if pc.ClientSecretFile != "" {
		if secret, err = secretfile.Read("client_secret_file", pc.ClientSecretFile); err != nil {
			return nil, err
		}
	}
	// A fetch of the discovery document or the keys follows a redirect to
	// https (or loopback) only, as the JWKS fetcher does. A post to the
	// token endpoint carries the client's credentials with the code and
	// its verifier, or a refresh token: a redirect, which a 307 or 308
	// would resend it on, is answered as a failure.
	fetch, post := *client, *client
	fetch.CheckRedirect = loopback.CheckRedirect
	post.CheckRedirect = loopback.NoRedirect
	return &provider{cfg: pc, redirect: u, secret: secret, client: &fetch, tokenClient: &post, now: now}, nil
}

// discover returns the provider's discovery (fetched once; a failure is
// retried after discoveryRetry).
func (p *provider) discover(ctx context.Context) (*oidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.op != nil {
		return p.op, nil
	}
	if p.lastErr != nil && p.now().Sub(p.at) < discoveryRetry {
		return nil, p.lastErr
	}
	p.at = p.now()
	op, err := oidc.NewProvider(oidc.ClientContext(ctx, p.client), p.cfg.IssuerURL)
	if err != nil {
		p.lastErr = err
		return nil, err
	}
	var extra struct {
		Issuer     string   `json:"issuer"`
		JWKS       string   `json:"jwks_uri"`
		EndSession string   `json:"end_session_endpoint"`
		IssParam   bool     `json:"authorization_response_iss_parameter_supported"`
		Algs       []string `json:"id_token_signing_alg_values_supported"`
	}
	_ = op.Claims(&extra)
	if err := checkEndpoints(op.Endpoint(), extra.JWKS, extra.EndSession); err != nil {
		p.lastErr = err
		return nil, err
	}
	p.op, p.endSession, p.lastErr = op, extra.EndSession, nil
	p.issuer, p.issParam = extra.Issuer, extra.IssParam
	p.keys = &keySet{url: extra.JWKS, client: p.client, now: p.now}
	p.algs = slices.DeleteFunc(extra.Algs, func(a string) bool { return !slices.Contains(signingAlgs, jose.SignatureAlgorithm(a)) })
	return op, nil
}

// checkResponseIssuer checks the iss of an authorization response (RFC
// 9207) against the provider the sign-in was started with, discovered.
// Several providers share one redirect URL, so the state alone does not
// say which provider answered: without this check, a provider that sends
// the browser on to another (a mix-up) would be handed the other's code
// and the PKCE verifier, enough to sign in as the user elsewhere. A
// response without iss passes only when the provider does not say it
// sends one.
func (p *provider) checkResponseIssuer(iss string, present bool) error {
	p.mu.Lock()
	want, required := p.issuer, p.issParam
	p.mu.Unlock()
	switch {
	case present && iss != want:
		return reason.New(reason.OIDCIssuerMismatch, "the authorization response names another identity provider (iss) than this sign-in's")
	case !present && required:
		return reason.New(reason.OIDCIssuerMismatch, "the authorization response names no issuer (iss), which this identity provider says it sends")
	}
	return nil
}

// checkEndpoints refuses a discovery document that names an endpoint the
// gateway uses (authorization, token, keys, and end-session when given)
// other than by an absolute https URL without credentials, or http on a
// loopback host: the rule of the issuer URL, and of jwks_uri in
// engine/jwks. The document may name any URL, and a plain http one
// would carry the client's credentials and the code, the keys that
// verify ID tokens, or the user's password page in clear.
func checkEndpoints(ep oauth2.Endpoint, jwks, endSession string) error {
	for _, e := range []struct {
		name, raw string
		optional  bool
	}{
		{"authorization_endpoint", ep.AuthURL, false},
		{"token_endpoint", ep.TokenURL, false},
		{"jwks_uri", jwks, false},
		{"end_session_endpoint", endSession, true},
	} {
		if e.raw == "" {
			if e.optional {
				continue
			}
			return fmt.Errorf("discovery document: no %s", e.name)
		}
		u, err := url.Parse(e.raw)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return fmt.Errorf("discovery document: %s: %w", e.name, err)
		}
		if !loopback.EndpointURL(u) {
			shown := *u
			shown.User, shown.RawQuery, shown.Fragment = nil, "", ""
			return fmt.Errorf("discovery document: %s %q must be an absolute https URL without credentials (http only on a loopback host)",
				e.name, shown.String())
		}
	}
	return nil
}

// oauth2 is the client configuration of the code flow.
func (p *provider) oauth2(op *oidc.Provider) *oauth2.Config {
	ep := op.Endpoint()
	// One attempt per code: probing the client authentication style
	// would spend the code on the first try.
	ep.AuthStyle = oauth2.AuthStyleInHeader
	if p.secret == "" {
		ep.AuthStyle = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID: p.cfg.ClientID, ClientSecret: p.secret, RedirectURL: p.cfg.RedirectURL,
		Endpoint: ep, Scopes: p.cfg.Scopes,
	}
}

// verifier verifies ID tokens and logout tokens of the provider: the
// signature through its JWKS (keySet, which bounds the fetches a forged
// token causes), iss, aud = client_id, exp. The provider must have been
// discovered.
func (p *provider) verifier() *oidc.IDTokenVerifier {
	p.mu.Lock()
	defer p.mu.Unlock()
	// No algs advertised: go-oidc's default, RS256.
	return oidc.NewVerifier(p.issuer, p.keys, &oidc.Config{ClientID: p.cfg.ClientID, Now: p.now, SupportedSigningAlgs: p.algs})
}

func (p *provider) status() wire.OIDCProviderStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := wire.OIDCProviderStatus{Name: p.cfg.Name, Tenant: p.cfg.Tenant, IssuerURL: p.cfg.IssuerURL, EndSession: p.endSession != ""}
	if p.op != nil {
		at := p.at.UTC()
		st.Discovered = &at
	}
	if p.lastErr != nil {
		st.LastError = p.lastErr.Error()
	}
	return st
}
