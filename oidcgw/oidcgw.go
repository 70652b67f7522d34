// Package oidcgw is svc's OpenID Connect relying party: browser sign-in
// with the authorization code flow and PKCE (S256) beside the SAML
// gateway (package samlgw), on the same sign-in listener, issuing the
// same session: the sidecar's own short-lived JWT, signed through the
// engine's token issuer (engine/issuer), in the session cookie that every
// check path reads.
//
// The flow keeps to the rules an RP must keep and some common proxies
// skip: the state is bound to the browser that started the sign-in by a
// cookie (login CSRF) and used once; the answer's iss (RFC 9207) must
// name the sign-in's provider (no mix-up of providers); the nonce is
// checked; the ID token is verified through the provider's discovery
// document and JWKS (signature, issuer, audience, expiry); return_to is
// a relative path on this site (no open redirect). A pending sign-in
// travels sealed in the browser's state cookie, so an anonymous login
// keeps nothing on the server; with rate_limit.redis_addr the replicas
// share the key that seals it, so a sign-in started on one replica
// completes on another.
//
// Several providers ([[sdk.oidc.providers]]) each sign in one tenant; the
// login page offers a tenant's providers (and SAML) when there is more
// than one, and goes straight through when there is one.
//
// With offline_access, sessions are refreshed with the provider's
// refresh token, kept sealed in the store: by the checks shortly before
// they expire (RenewSession), else through the login after they have,
// once across replicas either way.
//
// Lifecycle: New → Handler (served by the sidecar on the sign-in
// listener) → Close.
package oidcgw

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/engine/ratelimit"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/internal/sharedkey"
	"github.com/svc-dev/svc/internal/signincookie"
	"github.com/svc-dev/svc/wire"
)

// StateTTL is how long a sign-in started at login can be completed.
const StateTTL = 10 * time.Minute

// StateCookieSuffix is appended to sdk.session.cookie_name to name the
// state cookie ("svc_session_oidc" by default, "__Host-svc_session_oidc"
// wherever the gateway's cookies are Secure).
const StateCookieSuffix = "_oidc"

// Deps are the collaborators of a Gateway. Issuer is required.
type Deps struct {
	// Issuer signs the session tokens (engine.Engine.Issuer()).
	Issuer *issuer.Issuer
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Store keeps the answered states, revocations and refresh tokens;
	// default Redis when rate_limit.redis_addr is set, else memory.
	Store Store
	// StateKey seals the pending sign-ins; default the key Redis holds
	// under svc:oidc:state-key when the gateway keeps its store in Redis
	// (rate_limit.redis_addr set, Store not), else a random key of this
	// gateway. Replicas that share a Store of their own share a StateKey
	// too.
	StateKey sharedkey.Source
	// HTTPClient talks to the providers; default a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Gateway is the OpenID Connect relying party. It is safe for concurrent
// use.
type Gateway struct {
	cfg       config.OIDC
	session   config.Session
	tenant    string // sdk.tenant_id, for tokens that name none
	providers []*provider
	samlLogin string // the SAML login path, offered on the login page; "" without SAML
	issuer    *issuer.Issuer
	sessions  *token.Verifier // the gateway's own session tokens, for logout
	log       *slog.Logger
	store     Store
	sealer    *pendingSealer // the pending sign-ins, in the state cookie
	redis     *redis.Client
	jar       signincookie.Jar
	now       func() time.Time
	skew      time.Duration // jwt.clock_skew, for the iat of logout tokens
	// notRevoked caches Redis's "not revoked" answers (Revoked).
	notRevoked expiryCache
}

// New builds a Gateway from cfg.SDK.OIDC (which must be set), after
// cfg.SetDefaults. It reads the client secrets; the providers' discovery
// documents are fetched when first needed.
func New(cfg config.Config, deps Deps) (*Gateway, error) {
	o := cfg.SDK.OIDC
	if o == nil {
		return nil, errors.New("oidcgw: [sdk.oidc] is not configured")
	}
	if deps.Issuer == nil {
		return nil, errors.New("oidcgw: an issuer of session tokens is required")
	}
	deps.Logger = cmp.Or(deps.Logger, slog.Default())
	deps.HTTPClient = cmp.Or(deps.HTTPClient, &http.Client{Timeout: 10 * time.Second})
	if deps.Now == nil {
		deps.Now = time.Now
	}
	g := &Gateway{cfg: *o, session: cfg.SDK.Session, tenant: cfg.SDK.TenantID, issuer: deps.Issuer, log: deps.Logger, now: deps.Now,
		skew: cfg.JWT.ClockSkew.Duration}
	if s := cfg.SDK.SAML; s != nil {
		g.samlLogin = s.PathPrefix + "/login"
	}
	providers, err := newProviders(*o, deps.HTTPClient, deps.Now)
	if err != nil {
		return nil, err
	}
	// The session tokens, as the checks verify them (iss and aud are the
	// issuer's); uncached, as logout is their only use here.
	g.sessions, err = token.New(token.Options{Keys: deps.Issuer, Issuer: deps.Issuer.Issuer(),
		Audiences: []string{deps.Issuer.Issuer()}, TenantOptional: true, CacheSize: -1, Now: deps.Now})
	if err != nil {
		return nil, fmt.Errorf("oidcgw: %w", err)
	}
	secure := false
	for _, p := range providers {
		secure = secure || signincookie.SecureFor(p.redirect)
	}
	g.providers = providers
	g.jar = signincookie.Jar{Secure: secure, Session: g.session.CookieName, Now: deps.Now}
	g.store = deps.Store
	if g.store == nil {
		if cfg.RateLimit.RedisAddr != "" {
			if g.redis, err = ratelimit.RedisClient(cfg.RateLimit); err != nil {
				return nil, fmt.Errorf("oidcgw: %w", err)
			}
			g.store = NewRedisStore(g.redis)
		} else {
			g.store = NewMemoryStore(deps.Now)
		}
	}
	keys := deps.StateKey
	switch {
	case keys != nil:
	case g.redis != nil:
		keys = sharedkey.NewRedis(g.redis, stateKeyName, deps.Now)
	default:
		if keys, err = sharedkey.NewStatic(); err != nil {
			_ = g.Close()
			return nil, err
		}
	}
	g.sealer = &pendingSealer{keys: keys}
	return g, nil
}

// newProviders sets up every provider of o, reading its client secret
// file; an error names the provider's setting.
func newProviders(o config.OIDC, client *http.Client, now func() time.Time) ([]*provider, error) {
	var out []*provider
	for i, pc := range o.All() {
		p, err := newProvider(pc, client, now)
		if err != nil {
			key := "sdk.oidc"
			if pc.Name != config.DefaultOIDCProvider {
				key = fmt.Sprintf("sdk.oidc.providers[%d]", i)
			}
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("oidcgw: no provider is configured")
	}
	return out, nil
}

// CheckFiles reports what New would refuse in cfg's [sdk.oidc] from its
// files and values alone (each provider's redirect URL and client secret
// file), with the same functions; it fetches nothing. Nil without
// [sdk.oidc].
func CheckFiles(cfg config.Config) error {
	o := cfg.SDK.OIDC
	if o == nil {
		return nil
	}
	_, err := newProviders(*o, http.DefaultClient, time.Now)
	return err
}

// Close releases the Redis client the Gateway created, if any.
func (g *Gateway) Close() error {
	if g.redis != nil {
		return g.redis.Close()
	}
	return nil
}

// PathPrefix is where the endpoints are: sdk.oidc.path_prefix.
func (g *Gateway) PathPrefix() string { return g.cfg.PathPrefix }

// Mount registers g's endpoints on mux under the path prefix; it returns
// the pattern registered.
func Mount(mux *http.ServeMux, g *Gateway) string {
	pattern := g.cfg.PathPrefix + "/"
	mux.Handle(pattern, g.Handler())
	return pattern
}

// Status is what /v1/status shows of the gateway.
type Status = wire.OIDCStatus

// Status returns a snapshot of the gateway's state.
func (g *Gateway) Status() Status {
	st := Status{PathPrefix: g.cfg.PathPrefix, SharedState: g.redis != nil, TokenKeyID: g.issuer.KeyID()}
	if g.redis != nil {
		st.LogoutScope = "replicas"
	} else {
		st.LogoutScope = "process"
	}
	for _, p := range g.providers {
		st.Providers = append(st.Providers, p.status())
	}
	return st
}

// loginURL is the login endpoint with return_to when one is given.
func (g *Gateway) loginURL(returnTo string) string {
	u := g.cfg.PathPrefix + "/login"
	if returnTo != "" {
		u += "?return_to=" + url.QueryEscape(returnTo)
	}
	return u
}
