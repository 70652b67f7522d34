package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/engine/token"
)

// provider is one identity provider whose keys the engine keeps in a JWKS
// cache: sdk.jwks_url, jwt.issuer_url, or one [[jwt.issuers]] table.
type provider struct {
	// iss is the iss its tokens must carry; "" for sdk.jwks_url without
	// jwt.issuer.
	iss      string
	keys     *jwks.Cache
	verifier *token.Verifier
}

// tokenVerifier is what verifies a token outside development mode: a
// token.Chain, or a token.Router with several issuers.
type tokenVerifier interface {
	VerifyDerived(ctx context.Context, raw string) (token.Claims, any, error)
}

var (
	_ tokenVerifier = token.Chain(nil)
	_ tokenVerifier = (*token.Router)(nil)
)

// providerSpec is a provider as the configuration describes it.
type providerSpec struct {
	setting   string // the key that names it, for logs
	iss       string
	issuerURL string // discovery, else jwksURL
	jwksURL   string
	audiences []string
	// tenantClaim names the tenant claim; tenant, when set, is the tenant
	// of every token instead.
	tenantClaim, tenant string
}

// providerSpecs lists the identity providers of cfg: the one of
// sdk.jwks_url or jwt.issuer_url, or those of [[jwt.issuers]].
func providerSpecs(cfg config.Config) []providerSpec {
	j := cfg.JWT
	switch {
	case cfg.SDK.JWKSURL != "":
		return []providerSpec{{setting: "sdk.jwks_url", iss: j.Issuer, jwksURL: cfg.SDK.JWKSURL, audiences: j.Audiences}}
	case j.IssuerURL != "":
		return []providerSpec{{setting: "jwt.issuer_url", iss: j.IssuerURL, issuerURL: j.IssuerURL, audiences: j.Audiences}}
	}
	specs := make([]providerSpec, 0, len(j.Issuers))
	for i, is := range j.Issuers {
		sp := providerSpec{
			setting: fmt.Sprintf("jwt.issuers[%d]", i), iss: is.Iss(), issuerURL: is.IssuerURL, jwksURL: is.JWKSURL,
			audiences: is.Audiences, tenantClaim: is.TenantClaim, tenant: is.Tenant,
		}
		if len(sp.audiences) == 0 {
			sp.audiences = j.Audiences
		}
		specs = append(specs, sp)
	}
	return specs
}

// newProviders sets up the JWKS cache and the verifier of every identity
// provider of the configuration, fetched with client. Several providers
// share jwt.cache_size.
func (e *Engine) newProviders(client *http.Client) error {
	specs := providerSpecs(e.cfg)
	for _, sp := range specs {
		p, err := e.newProvider(sp, client, max(e.cfg.JWT.CacheSize/len(specs), 64))
		if err != nil {
			return err
		}
		e.providers = append(e.providers, p)
		switch {
		case len(sp.audiences) > 0:
		case len(e.cfg.JWT.Issuers) == 0:
			e.log.Warn("jwt.audiences is unset: any token the identity provider issues for any client or API is accepted; set jwt.audiences (SVC_JWT_AUDIENCES) to this API's audience")
		default:
			e.log.Warn("no audience is required: any token this identity provider issues for any client or API is accepted; set its audiences, or jwt.audiences, to this API's audience",
				"setting", sp.setting, "issuer", sp.iss)
		}
	}
	return nil
}

// newProvider sets up one provider's JWKS cache and verifier.
func (e *Engine) newProvider(sp providerSpec, client *http.Client, cacheSize int) (*provider, error) {
	cfg := e.cfg
	p := &provider{iss: sp.iss}
	var err error
	p.keys, err = jwks.New(jwks.Options{
		URL:          sp.jwksURL,
		IssuerURL:    sp.issuerURL,
		Client:       client,
		FetchTimeout: cfg.JWT.JWKSFetchTimeout.Duration,
		MinRefresh:   cfg.JWT.JWKSMinRefresh.Duration,
		MaxRefresh:   cfg.JWT.JWKSMaxRefresh.Duration,
		// Fetch failures name the setting they come from.
		Logger: e.log.With("setting", cfg.Setting(sp.setting)),
		Now:    e.now,
		// Tokens verified with a key the provider withdrew (or replaced
		// under its kid) leave the cache with the key. Run, the only
		// source of fetches before the first Verify, starts after
		// p.verifier is set.
		OnChange: func() {
			if n := p.verifier.Retain(p.keys.Holds); n > 0 {
				e.log.Info("jwks changed: cached tokens of withdrawn keys dropped", "dropped", n, "issuer", p.iss)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%s: jwks: %w", sp.setting, err)
	}
	p.verifier, err = token.New(token.Options{
		Keys:           p.keys,
		Issuer:         sp.iss,
		Audiences:      sp.audiences,
		Skew:           cfg.JWT.ClockSkew.Duration,
		CacheSize:      cacheSize,
		CacheMaxAge:    cfg.JWT.CacheMaxAge.Duration,
		AllowedTyp:     cfg.JWT.AllowedTyp,
		TenantClaim:    sp.tenantClaim,
		TenantOptional: sp.tenant != "",
		Now:            e.now,
		Derive:         principalDeriver(KindJWT, "", sp.tenantClaim, sp.tenant),
	})
	if err != nil {
		return nil, fmt.Errorf("%s: token verifier: %w", sp.setting, err)
	}
	return p, nil
}

// newTokenVerifier sets e.tokens: with [[jwt.issuers]] a router by iss
// over the providers and the SAML gateway's local verifier; else a chain
// of the local verifier and the one provider's, each when set.
func (e *Engine) newTokenVerifier() error {
	if len(e.cfg.JWT.Issuers) > 0 {
		vs := make([]*token.Verifier, 0, len(e.providers)+1)
		if e.local != nil {
			vs = append(vs, e.local)
		}
		for _, p := range e.providers {
			vs = append(vs, p.verifier)
		}
		r, err := token.NewRouter(vs...)
		if err != nil {
			// Validate refused two [[jwt.issuers]] of one iss: the
			// clash is with the SAML gateway's entity id.
			return fmt.Errorf("jwt.issuers and sdk.saml.entity_id: %w", err)
		}
		e.tokens = r
		return nil
	}
	var chain token.Chain
	if e.local != nil {
		chain = append(chain, e.local)
	}
	for _, p := range e.providers {
		chain = append(chain, p.verifier)
	}
	if len(chain) == 0 && e.apiKeyFile == nil && e.clientCerts == nil && e.introspector == nil {
		// An identity source config.IdentitySources lists that no
		// verifier serves would leave every token unverifiable; refuse
		// to start rather than fail on the first request.
		return fmt.Errorf("identity sources %v: no token verifier serves them", e.cfg.IdentitySources())
	}
	e.tokens = chain
	return nil
}

// jwksVerifier is the verifier of the one provider, nil without one or
// with several.
func (e *Engine) jwksVerifier() *token.Verifier {
	if len(e.providers) != 1 {
		return nil
	}
	return e.providers[0].verifier
}

// refreshKeys keeps every provider's JWKS current until ctx ends, then
// closes e.done.
func (e *Engine) refreshKeys(ctx context.Context) {
	defer close(e.done)
	done := make(chan struct{}, len(e.providers))
	for _, p := range e.providers {
		go func() {
			defer func() { done <- struct{}{} }()
			if err := p.keys.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				e.log.Error("jwks refresh stopped", "err", err, "issuer", p.iss)
			}
		}()
	}
	for range e.providers {
		<-done
	}
}

// IssuerStatus is one identity provider's JWKS state.
type IssuerStatus struct {
	// Issuer is the iss its tokens carry ("" for sdk.jwks_url without
	// jwt.issuer).
	Issuer string      `json:"issuer"`
	JWKS   jwks.Status `json:"jwks"`
}

// issuerStatus is every provider's state, and their sum: the one
// provider's own state, or with several the keys and fetches added up,
// the last error and partition of the first provider that has one, the
// oldest last success and the soonest next refresh.
func (e *Engine) issuerStatus() ([]IssuerStatus, jwks.Status) {
	if len(e.providers) == 0 {
		return nil, jwks.Status{}
	}
	list := make([]IssuerStatus, len(e.providers))
	for i, p := range e.providers {
		list[i] = IssuerStatus{Issuer: p.iss, JWKS: p.keys.Status()}
	}
	if len(list) == 1 {
		return list, list[0].JWKS
	}
	var sum jwks.Status
	for i, is := range list {
		s := is.JWKS
		sum.KeySets += s.KeySets
		sum.Keys += s.Keys
		sum.Rejected += s.Rejected
		sum.Fetches += s.Fetches
		sum.FetchFailures += s.FetchFailures
		sum.LastFetch = later(sum.LastFetch, s.LastFetch)
		if i == 0 || s.LastSuccess.Before(sum.LastSuccess) {
			sum.LastSuccess = s.LastSuccess
		}
		sum.KeyAge = max(sum.KeyAge, s.KeyAge)
		if sum.LastError == "" && s.LastError != "" {
			sum.LastError = is.Issuer + ": " + s.LastError
		}
		if s.Partitioned && !sum.Partitioned {
			sum.Partitioned, sum.PartitionedSince = true, s.PartitionedSince
		}
		if sum.NextRefresh.IsZero() || (!s.NextRefresh.IsZero() && s.NextRefresh.Before(sum.NextRefresh)) {
			sum.NextRefresh = s.NextRefresh
		}
	}
	return list, sum
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
