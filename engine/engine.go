// Package engine is svc's decision engine, usable in-process by Go programs
// and embedded by svc-sidecar: it verifies bearer JWTs against a cached,
// rotating JWKS and evaluates svc.authz Rego policies.
//
// An Engine is created from a configuration with New, answers decision
// requests concurrently (Decide, and its shorthands ValidateToken,
// Authorize and Evaluate), swaps its policy set atomically on
// ReloadPolicies or SetPolicies, and is released by Close.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/svc-dev/svc/engine/apikey"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/decisionlog"
	"github.com/svc-dev/svc/engine/devissuer"
	"github.com/svc-dev/svc/engine/introspect"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/ratelimit"
	"github.com/svc-dev/svc/engine/reqpath"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/engine/version"
	"github.com/svc-dev/svc/internal/jsonmask"
	"github.com/svc-dev/svc/internal/warnevery"
	"github.com/svc-dev/svc/policies"
	"github.com/svc-dev/svc/reason"
)

// AnonymousSubject is the subject applications see in development mode and
// when a fail-open client could not reach the sidecar.
const AnonymousSubject = "anonymous"

// Deps are the collaborators of an Engine. Every field is optional.
type Deps struct {
	// Logger receives the engine's logs; default slog.Default().
	Logger *slog.Logger
	// HTTPClient fetches the JWKS; default a client with sane timeouts.
	HTTPClient *http.Client
	// TracerProvider and MeterProvider instrument decisions; default no-op.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// Audit receives one record per decision; default none.
	Audit AuditSink
	// Observer sees every decision while it is observing (live streams,
	// dry-run sessions); default none.
	Observer DecisionObserver
	// Limiter enforces per-tenant budgets; default from the
	// configuration's rate_limit table, in Redis when redis_addr is set,
	// else in memory.
	Limiter ratelimit.Limiter
	// Now is the clock; default time.Now.
	Now func() time.Time
	// DevIssuer is the development issuer (core dev token), used in
	// development mode only: tokens with its iss are verified with its
	// key, every other bearer is anonymous. Nil: every bearer is
	// anonymous in development mode.
	DevIssuer token.KeySource
}

// AuditSink receives audit records. It must never block.
type AuditSink interface {
	Log(audit.Record)
}

// Engine verifies tokens and evaluates policies. It is safe for
// concurrent use.
type Engine struct {
	cfg     config.Config
	devMode bool // cfg.DevMode(), asked once per token
	log     *slog.Logger
	now     func() time.Time
	// providers are the identity providers whose JWKS the engine keeps
	// (sdk.jwks_url, jwt.issuer_url or [[jwt.issuers]]); none in
	// development mode.
	providers []*provider
	// tokens verifies every token outside development mode: with one
	// provider a token.Chain of local, then the provider's verifier, each
	// when set; with [[jwt.issuers]] a token.Router by iss.
	tokens tokenVerifier
	// revocable wraps tokens with [sdk.oidc]: the check of sessions
	// ended by back-channel logout (SetSessionRevocation).
	revocable *revocable
	// devChain verifies the development issuer's tokens (dev alone).
	devChain token.Chain
	// issuer signs the tokens of the SAML gateway and local verifies them
	// from its keys; both nil without [sdk.saml].
	issuer *issuer.Issuer
	local  *token.Verifier
	// dev verifies the tokens of the development issuer in development
	// mode; nil otherwise.
	dev *token.Verifier
	// apiKeyFile is api_keys.file and apiKeys the keys in force from it;
	// both nil without it. apiKeysDone is closed when its watch ends.
	apiKeyFile  *apikey.File
	apiKeys     atomic.Pointer[apiKeySet]
	apiKeysDone chan struct{}
	// decisions ships decision records ([decision_log]); nil without a
	// sink. decisionsDone is closed when its shipping ends.
	decisions     *decisionlog.Logger
	decisionsDone chan struct{}
	// decisionMask is decision_log.mask; nil when empty.
	decisionMask *jsonmask.Mask
	// clientCerts is [client_certs]; nil without trust domains.
	clientCerts *clientCertSet
	// introspector asks introspection.url about bearers that are not a
	// JWS; nil without [introspection].
	introspector *introspect.Client
	policies     *policy.Store
	limiter      ratelimit.Limiter
	redis        *redis.Client // the limiter's client when New made one
	// fallback wraps the Redis limiter when New made one; atomic because
	// metric callbacks may read it while New sets it.
	fallback atomic.Pointer[ratelimit.Fallback]
	audit    AuditSink
	observer DecisionObserver
	dryRun   bool // policy.mode = "dry-run": the policy never denies
	canon    reqpath.Canon
	tel      *instruments
	started  time.Time

	// limiterWarned spaces the warnings of a failing limiter; uncounted
	// counts the requests passed since the latest.
	limiterWarned warnevery.Gate
	uncounted     atomic.Int64
	// introspectWarned spaces the warnings of a failing introspection
	// endpoint.
	introspectWarned warnevery.Gate

	reloadMu sync.Mutex
	stop     context.CancelFunc
	done     chan struct{}
}

// New creates an Engine: it validates cfg, loads the policy set (the
// embedded default policy when cfg.Policy.Dir is empty) and, unless in
// development mode, starts refreshing the JWKS in the background.
func New(cfg config.Config, deps Deps) (*Engine, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := newEngine(cfg, deps)
	set, err := loadPolicies(cfg)
	if err != nil {
		return nil, err
	}
	e.policies = policy.NewStore(set)
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	if err := e.newIdentitySources(ctx, deps); err != nil {
		cancel()
		return nil, err
	}
	if err := e.openDecisionMask(); err != nil {
		cancel()
		return nil, err
	}
	// Before the instruments, which observe it.
	if err := e.openDecisionLog(ctx); err != nil {
		cancel()
		return nil, err
	}
	if e.tel, err = newInstruments(tracerProvider(deps), meterProvider(deps), e); err != nil {
		cancel()
		return nil, err
	}
	// Last, so that no earlier failure leaves a client open.
	if err := e.openRedis(); err != nil {
		cancel()
		return nil, err
	}
	e.newSharedLimiter()
	e.shareIntrospection()
	return e, nil
}

// openRedis makes the client of rate_limit.redis_addr when the shared
// limiter or the introspection cache will use it (ratelimit.RedisClient:
// TLS, the ACL user and the password of [rate_limit]).
func (e *Engine) openRedis() error {
	cfg := e.cfg
	limits := e.limiter == nil && !cfg.RateLimit.Disabled
	if cfg.RateLimit.RedisAddr == "" || (!limits && e.introspector == nil) {
		return nil
	}
	opts, err := redisOptions(cfg)
	if err != nil {
		return err
	}
	e.redis = redis.NewClient(opts)
	return nil
}

// redisOptions are the options of the client of rate_limit.redis_addr
// (ratelimit.RedisOptionsFor, which reads the password and CA files);
// an error names the setting of the file.
func redisOptions(cfg config.Config) (*redis.Options, error) {
	opts, err := ratelimit.RedisOptionsFor(cfg.RateLimit)
	if err != nil {
		key, inner := fileSetting(err, "rate_limit.redis_addr")
		return nil, &SettingError{Key: key, Origin: cfg.Origin(key), Msg: inner.Error(), Err: err}
	}
	return opts, nil
}

// newEngine is an Engine with cfg's settings and deps' collaborators, or
// their defaults: slog.Default, time.Now, and the in-memory limiter
// unless rate limits are off or shared through Redis.
func newEngine(cfg config.Config, deps Deps) *Engine {
	e := &Engine{
		cfg:     cfg,
		devMode: cfg.DevMode(),
		log:     deps.Logger,
		now:     deps.Now,
		limiter: deps.Limiter,
		audit:   deps.Audit,
		done:    make(chan struct{}),

		apiKeysDone:   make(chan struct{}),
		decisionsDone: make(chan struct{}),

		observer: deps.Observer,
		dryRun:   cfg.Policy.Mode == config.PolicyModeDryRun,
		canon:    canonOf(cfg),
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.now == nil {
		e.now = time.Now
	}
	e.started = e.now()
	if e.limiter == nil && !cfg.RateLimit.Disabled && cfg.RateLimit.RedisAddr == "" {
		e.limiter = ratelimit.NewMemory(cfg.RateLimitFor, e.now)
	}
	return e
}

func tracerProvider(deps Deps) trace.TracerProvider {
	if deps.TracerProvider == nil {
		return tracenoop.NewTracerProvider()
	}
	return deps.TracerProvider
}

func meterProvider(deps Deps) metric.MeterProvider {
	if deps.MeterProvider == nil {
		return metricnoop.NewMeterProvider()
	}
	return deps.MeterProvider
}

// newIdentitySources sets up what verifies tokens: the SAML gateway's
// issuer and its local verifier ([sdk.saml]), then the development
// issuer's verifier in development mode, or else each identity
// provider's JWKS and verifier (sdk.jwks_url, jwt.issuer_url or
// [[jwt.issuers]]), whose refresh runs until ctx ends; e.tokens chains or
// routes the verifiers. e.done is closed when no refresh runs.
func (e *Engine) newIdentitySources(ctx context.Context, deps Deps) error {
	if e.cfg.SignIn() {
		if err := e.newLocalIssuer(e.cfg.SDK.Session); err != nil {
			return err
		}
	}
	e.clientCerts = newClientCertSet(e.cfg.ClientCerts)
	if e.cfg.APIKeys.File != "" {
		if err := e.openAPIKeys(); err != nil {
			return err
		}
		go e.watchAPIKeys(ctx)
	} else {
		close(e.apiKeysDone)
	}
	switch {
	case e.devMode:
		if err := e.newDevVerifier(deps.DevIssuer); err != nil {
			return err
		}
		e.log.Warn("DEVELOPMENT MODE: no identity source is configured (no sdk.jwks_url, no jwt.issuer_url, no [[jwt.issuers]], no [sdk.saml], no api_keys.file, no client_certs.trust_domains, no introspection.url, no [sdk.oidc]), so EVERY bearer token is accepted without verification as the user anonymous, except tokens of the development issuer (core dev token, iss svc-dev), which are verified; set sdk.jwks_url (SVC_JWKS_URL), jwt.issuer_url (SVC_JWT_ISSUER_URL), [[jwt.issuers]], [sdk.saml], api_keys.file (SVC_API_KEYS_FILE), client_certs.trust_domains or introspection.url (SVC_INTROSPECTION_URL) before serving real traffic",
			"reason", reason.DevAnonymous, "tenant", e.cfg.SDK.TenantID, "dev_issuer", e.dev != nil)
		close(e.done)
		return nil
	}
	if e.cfg.Introspection.URL != "" {
		if err := e.newIntrospector(deps.HTTPClient); err != nil {
			return err
		}
	}
	if err := e.newProviders(deps.HTTPClient); err != nil {
		return err
	}
	if len(e.providers) == 0 {
		close(e.done)
	} else {
		go e.refreshKeys(ctx)
	}
	if err := e.newTokenVerifier(); err != nil {
		return err
	}
	if e.cfg.SDK.OIDC != nil {
		e.revocable = &revocable{tokenVerifier: e.tokens}
		e.tokens = e.revocable
	}
	return nil
}

// newSharedLimiter shares the rate-limit budgets of every replica through
// Redis (rate_limit.redis_addr), behind the fallback mode
// (rate_limit.redis_fallback), unless deps gave a limiter or rate limits
// are off.
func (e *Engine) newSharedLimiter() {
	cfg := e.cfg
	if e.limiter != nil || cfg.RateLimit.Disabled || cfg.RateLimit.RedisAddr == "" {
		return
	}
	timeout := cfg.RateLimit.RedisTimeout.Duration
	shared := ratelimit.NewRedis(e.redis, cfg.RateLimitFor, ratelimit.RedisOptions{Now: e.now, Timeout: timeout})
	// Validate accepted the mode; Parse maps "" to the default.
	mode, _ := ratelimit.ParseFallbackMode(cfg.RateLimit.RedisFallback)
	fb := ratelimit.NewFallback(shared, cfg.RateLimitFor, mode, cfg.RateLimit.Replicas, e.now)
	e.fallback.Store(fb)
	e.limiter = fb
}

// PolicyOptions are the compile options of every policy the sidecar
// serves or dry-runs under cfg: policy.dir, uploaded and polled bundles,
// dry-run candidates.
func PolicyOptions(cfg config.Config) []policy.Option {
	opts := []policy.Option{policy.AllowNetworkBuiltins(cfg.Policy.AllowNetworkBuiltins)}
	if n := cfg.Policy.DecisionCacheSize; n > 0 {
		opts = append(opts, policy.DecisionCacheSize(n))
	}
	return opts
}

// loadPolicies loads policy.dir, or the embedded default when it is
// empty. Errors name the setting and where it was set.
func loadPolicies(cfg config.Config) (*policy.Set, error) {
	dir := cfg.Policy.Dir
	opts := PolicyOptions(cfg)
	if dir == "" {
		set, err := policy.LoadFS(policies.Default, ".", opts...)
		if err != nil {
			return nil, fmt.Errorf("embedded default policy: %w", err)
		}
		return set, nil
	}
	set, err := policy.Load(dir, opts...)
	if err == nil {
		return set, nil
	}
	msg := err.Error()
	if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
		msg = "policy directory " + dir + " does not exist"
	}
	return nil, &SettingError{Key: "policy.dir", Origin: cfg.Origin("policy.dir"), Msg: msg, Err: err}
}

// Check reports what New would refuse in cfg, without starting anything:
// the configuration's values, the policy set (it loads and compiles, from
// policy.dir or the embedded default), the SAML gateway's token
// signing key, the API-key file, the introspection client's secret file,
// the decision log sink's files and the audit log file's directory. New
// (and, for the audit log, audit.Open) runs the same steps with the same
// functions; `core config validate` runs Check, so that the two cannot
// disagree.
func Check(cfg config.Config) error {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if _, err := loadPolicies(cfg); err != nil {
		return err
	}
	if cfg.SignIn() {
		if _, err := newSessionIssuer(cfg.SDK.Session, time.Now); err != nil {
			return err
		}
	}
	if path := cfg.APIKeys.File; path != "" {
		if _, err := apikey.Open(path, time.Now()); err != nil {
			return &SettingError{Key: "api_keys.file", Origin: cfg.Origin("api_keys.file"), Msg: err.Error(), Err: err}
		}
	}
	if cfg.Introspection.URL != "" {
		if _, err := readClientSecret(cfg); err != nil {
			return err
		}
	}
	if cfg.DecisionLog.Enabled() {
		if _, err := readDecisionSinkFiles(cfg.DecisionLog); err != nil {
			return err
		}
	}
	if cfg.RateLimit.RedisAddr != "" {
		if _, err := redisOptions(cfg); err != nil {
			return err
		}
	}
	if cfg.Audit.Enabled() {
		if err := audit.CheckDestination(cfg.Audit.Destination); err != nil {
			return &SettingError{Key: "audit.destination", Origin: cfg.Origin("audit.destination"), Msg: err.Error(), Err: err}
		}
	}
	return nil
}

// newSessionIssuer loads (or, without a key file, generates) the keys that
// sign the session tokens of browser sign-in (SAML, OpenID Connect).
func newSessionIssuer(s config.Session, now func() time.Time) (*issuer.Issuer, error) {
	is, err := issuer.New(issuer.Options{
		KeyFile: s.TokenSigningKeyFile,
		Issuer:  s.Issuer,
		TTL:     s.TokenTTL.Duration,
		Now:     now,
	})
	if err != nil {
		return nil, fmt.Errorf("sdk.session.token_signing_key_file: %w", err)
	}
	return is, nil
}

// newLocalIssuer sets up the keys of the tokens the SAML gateway issues
// and their local verifier: iss and aud must be the SP entity id.
func (e *Engine) newLocalIssuer(s config.Session) error {
	var err error
	if e.issuer, err = newSessionIssuer(s, e.now); err != nil {
		return err
	}
	if e.issuer.Generated() {
		e.log.Warn("sdk.saml.token_signing_key_file is not set: a signing key was generated for this process; the tokens it issues do not survive a restart and are not accepted by other replicas",
			"kid", e.issuer.KeyID())
	}
	size := e.cfg.JWT.CacheSize / 4
	if size < 64 {
		size = 64
	}
	e.local, err = token.New(token.Options{
		Keys:      e.issuer,
		Issuer:    s.Issuer,
		Audiences: []string{s.Issuer},
		Skew:      e.cfg.JWT.ClockSkew.Duration,
		CacheSize: size,
		Now:       e.now,
		Derive:    principalDeriver(KindSession, "saml", "", ""),
	})
	if err != nil {
		return fmt.Errorf("local token verifier: %w", err)
	}
	return nil
}

// newDevVerifier verifies the development issuer's tokens with keys.
func (e *Engine) newDevVerifier(keys token.KeySource) error {
	if keys == nil {
		return nil
	}
	var err error
	e.dev, err = token.New(token.Options{
		Keys:      keys,
		Issuer:    devissuer.Issuer,
		Skew:      e.cfg.JWT.ClockSkew.Duration,
		CacheSize: 256,
		Now:       e.now,
		Derive:    principalDeriver(KindJWT, "", "", ""),
	})
	if err != nil {
		return fmt.Errorf("development token verifier: %w", err)
	}
	e.devChain = token.Chain{e.dev}
	return nil
}

// Issuer returns the signer of the tokens the SAML gateway issues, nil
// without [sdk.saml]. The engine verifies those tokens from its keys.
func (e *Engine) Issuer() *issuer.Issuer { return e.issuer }

// Config returns the effective configuration.
func (e *Engine) Config() config.Config { return e.cfg }

// DevMode reports whether tokens are accepted without verification: the
// configuration has no identity source (config.Config.DevMode), the one
// rule every part of svc asks.
func (e *Engine) DevMode() bool { return e.devMode }

// PolicyMode is "enforce" or "dry-run" (policy.mode).
func (e *Engine) PolicyMode() string {
	if e.dryRun {
		return config.PolicyModeDryRun
	}
	return config.PolicyModeEnforce
}

// Policies returns the active policy set.
func (e *Engine) Policies() *policy.Set { return e.policies.Load() }

// ReloadPolicies reloads the policy directory and swaps it in atomically.
// On error the active set stays.
func (e *Engine) ReloadPolicies(ctx context.Context) error {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	set, err := loadPolicies(e.cfg)
	if err != nil {
		return err
	}
	e.policies.Swap(set)
	e.log.InfoContext(ctx, "policies reloaded", "files", len(set.Files()), "revision", set.Revision())
	return nil
}

// SetPolicies swaps in an already compiled set (for example from a
// verified bundle) atomically and returns the one it replaced.
func (e *Engine) SetPolicies(set *policy.Set) *policy.Set {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	return e.policies.Swap(set)
}

// Status is a snapshot of the engine's state for status endpoints.
type Status struct {
	Version        string `json:"version"`
	DevMode        bool   `json:"dev_mode"`
	PolicyMode     string `json:"policy_mode"`
	TenantID       string `json:"tenant_id"`
	PolicyFiles    int    `json:"policy_files"`
	PolicyRevision string `json:"policy_revision"`
	// JWKS is the one provider's JWKS state, or with several
	// ([[jwt.issuers]]) their sum (see Issuers).
	JWKS jwks.Status `json:"jwks"`
	// Issuers is each identity provider's JWKS state, in the
	// configuration's order; empty in development mode and without a
	// JWKS.
	Issuers []IssuerStatus `json:"issuers,omitempty"`
	// RateLimit is the Redis limiter's fallback state; nil without
	// rate_limit.redis_addr.
	RateLimit *ratelimit.FallbackStatus `json:"rate_limit,omitempty"`
	// APIKeys is the state of api_keys.file; nil without it.
	APIKeys *apikey.Status `json:"api_keys,omitempty"`
	// DecisionLog is the state of [decision_log]; nil without a sink.
	DecisionLog *decisionlog.Stats `json:"decision_log,omitempty"`
	// ClientCerts is the state of [client_certs]; nil without it.
	ClientCerts *ClientCertStatus `json:"client_certs,omitempty"`
	// Introspection is the state of the introspection client; nil
	// without [introspection].
	Introspection *IntrospectionStatus `json:"introspection,omitempty"`
	Started       time.Time            `json:"started"`
	Uptime        string               `json:"uptime"`
}

// Status returns a snapshot of the engine's state.
func (e *Engine) Status() Status {
	set := e.policies.Load()
	s := Status{
		Version:        version.Version,
		DevMode:        e.DevMode(),
		PolicyMode:     e.PolicyMode(),
		TenantID:       e.cfg.SDK.TenantID,
		PolicyFiles:    len(set.Files()),
		PolicyRevision: set.Revision(),
		Started:        e.started,
		Uptime:         e.now().Sub(e.started).Round(time.Second).String(),
	}
	s.Issuers, s.JWKS = e.issuerStatus()
	if fb := e.fallback.Load(); fb != nil {
		rs := fb.Status()
		s.RateLimit = &rs
	}
	if e.apiKeyFile != nil {
		ks := e.apiKeyFile.Status()
		s.APIKeys = &ks
	}
	s.DecisionLog = e.decisionLogStatus()
	if e.clientCerts != nil {
		s.ClientCerts = e.clientCerts.status()
	}
	s.Introspection = e.introspectionStatus()
	return s
}

// Close stops the background JWKS refresh and the watch of the API-key
// file, and closes the rate limiter's Redis client. It is safe to call
// twice.
func (e *Engine) Close() error {
	e.stop()
	<-e.done
	<-e.apiKeysDone
	<-e.decisionsDone
	if e.redis != nil {
		if err := e.redis.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			return fmt.Errorf("close redis client: %w", err)
		}
	}
	return nil
}
