// Package samlgw is svc's SAML 2.0 service provider: SP-initiated login
// (HTTP-Redirect AuthnRequest), the assertion consumer service (HTTP-POST),
// SP metadata, the JWKS of the tokens it issues, and logout. It is built on
// github.com/crewjam/saml (message types, AuthnRequest and metadata
// generation, XML encryption) and github.com/russellhaering/goxmldsig, with
// stricter rules than crewjam applies on its own at the ACS: exactly one
// assertion, only the content the verified signature covers is read (XML
// signature wrapping), SHA-1 refused, replay refused (in memory or Redis),
// no DTD, a required tenant attribute, and every refusal a stable code.
//
// An accepted assertion becomes a short-lived ES256 JWT signed through the
// engine (engine/issuer), which the engine verifies from its local keys
// like any IdP token.
//
// Lifecycle: New → Handler (served by the sidecar on its own listener) and
// Run(ctx), which refreshes the IdP metadata until ctx ends. An
// application that embeds the engine runs a gateway itself with Start (on
// the engine's configuration and issuer; Close ends it) and Mount (the
// endpoints in its own mux).
package samlgw

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/engine/ratelimit"
	"github.com/svc-dev/svc/internal/sharedkey"
	"github.com/svc-dev/svc/internal/signincookie"
	"github.com/svc-dev/svc/wire"
)

// MaxBodyBytes caps an ACS request body; a larger one is refused with 413.
const MaxBodyBytes = 1 << 20

// RequestTTL is how long an AuthnRequest can be answered.
const RequestTTL = 10 * time.Minute

// DevEnvVar set to DevEnvValue turns off the verification of SAML
// signatures, for trying the gateway with an identity provider that does
// not sign. New refuses it outside a local trial (localTrial: every
// listener on loopback, no identity source but [sdk.saml]): anywhere
// else, a variable left in an environment would let anyone who reaches
// the sign-in endpoint sign in as anyone.
const (
	DevEnvVar   = "SVC_ENV"
	DevEnvValue = "development"
)

// AuditSink receives one record per ACS outcome. It must never block.
type AuditSink interface {
	Log(audit.Record)
}

// Deps are the collaborators of a Gateway. Issuer is required.
type Deps struct {
	// Issuer signs the tokens (engine.Engine.Issuer()).
	Issuer *issuer.Issuer
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Audit receives ACS outcomes; optional.
	Audit AuditSink
	// MeterProvider counts ACS outcomes; default no-op.
	MeterProvider metric.MeterProvider
	// Store is the replay store; default Redis when rate_limit.redis_addr
	// is set, else memory.
	Store Store
	// HTTPClient fetches the IdP metadata; default a plain client.
	HTTPClient *http.Client
	// Getenv reads DevEnvVar; default os.Getenv.
	Getenv func(string) string
	// ListenAddr is the address the gateway's endpoints are served on:
	// sidecar.saml_addr in svc-sidecar, the application's own listener
	// when it embeds the gateway. DevEnvVar, and allow_idp_initiated
	// without Redis, are accepted only when it is a loopback address or a
	// Unix socket (unix:///path); empty means not known, so neither is.
	ListenAddr string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Gateway is the SAML service provider. It is safe for concurrent use.
type Gateway struct {
	cfg      config.SAML
	acsURL   *url.URL
	issuer   *issuer.Issuer
	log      *slog.Logger
	audit    AuditSink
	meta     *metadataSource
	v        *validator
	spKey    crypto.Signer
	spCert   *x509.Certificate
	secure   bool // Secure cookies
	redis    *redis.Client
	now      func() time.Time
	outcomes metric.Int64Counter
	acs      *acsGate
	// clients names the client of an ACS post; busy counts the saml-busy
	// refusals by bound and lane.
	clients clientNamer
	busy    metric.Int64Counter
	// ignoredForwarding is set once a post named its client in a header
	// from a peer not in sidecar.trusted_proxies (logged once).
	ignoredForwarding atomic.Bool
}

// New builds a Gateway from cfg.SDK.SAML (which must be set). With an
// idp_metadata_file the file is read now; an idp_metadata_url is fetched
// by Run.
func New(cfg config.Config, deps Deps) (*Gateway, error) {
	s := cfg.SDK.SAML
	if s == nil {
		return nil, errors.New("samlgw: [sdk.saml] is not configured")
	}
	if deps.Issuer == nil {
		return nil, errors.New("samlgw: a token issuer is required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Getenv == nil {
		deps.Getenv = os.Getenv
	}
	if deps.HTTPClient == nil {
		deps.HTTPClient = &http.Client{Timeout: MetadataFetchTimeout}
	}
	if deps.MeterProvider == nil {
		deps.MeterProvider = metricnoop.NewMeterProvider()
	}
	acs, err := url.Parse(s.ACSURL)
	if err != nil {
		return nil, fmt.Errorf("sdk.saml.acs_url: %w", err)
	}
	skipSig, err := DevEnv(cfg, deps.ListenAddr, deps.Getenv)
	if err != nil {
		return nil, err
	}
	if s.AllowIDPInitiated && cfg.RateLimit.RedisAddr == "" && deps.Store == nil {
		// config.Validate has checked the configuration's listeners; an
		// embedding application's own listener is known only here.
		if why := localTrial(cfg, deps.ListenAddr); why != "" {
			return nil, &config.Error{Source: cfg.Origin("sdk.saml.allow_idp_initiated"), Key: "sdk.saml.allow_idp_initiated", Msg: fmt.Sprintf(
				"true requires rate_limit.redis_addr (SVC_REDIS_ADDR) outside %s; here %s: without Redis the assertion replay cache is per process",
				config.LocalTrialRule(), why)}
		}
	}
	trusted, err := config.ParseTrustedProxies(cfg.Sidecar.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("sidecar.trusted_proxies: %w", err)
	}
	g := &Gateway{
		cfg: *s, acsURL: acs, issuer: deps.Issuer, log: deps.Logger, audit: deps.Audit, now: deps.Now,
		secure: signincookie.SecureFor(acs),
	}
	// The pacing runs on the wall clock, whatever clock validates the
	// assertions: it measures the CPU the ACS takes now.
	g.acs, g.clients = newACSGate(*s, time.Now), clientNamer{trusted: trusted}
	// CheckFiles reads the same files with the same functions.
	if g.spKey, g.spCert, err = loadSPKeyPair(*s); err != nil {
		return nil, err
	}
	store := deps.Store
	if store == nil {
		if cfg.RateLimit.RedisAddr != "" {
			if g.redis, err = ratelimit.RedisClient(cfg.RateLimit); err != nil {
				return nil, fmt.Errorf("samlgw: %w", err)
			}
			store = NewRedisStore(g.redis)
		} else {
			store = NewMemoryStore(deps.Now)
		}
	}
	var keys sharedkey.Source
	if g.redis != nil {
		keys = sharedkey.NewRedis(g.redis, requestKeyName, deps.Now)
	} else if keys, err = sharedkey.NewStatic(); err != nil {
		g.Close()
		return nil, err
	}
	g.v = &validator{
		entityID: s.EntityID, acsURL: s.ACSURL,
		skew:              time.Duration(s.ClockSkewSeconds) * time.Second,
		allowIDPInitiated: s.AllowIDPInitiated,
		skipSignature:     skipSig,
		mapping:           s.AttributeMapping,
		store:             store,
		requests:          &requestIDs{keys: keys, now: deps.Now, ttl: RequestTTL},
		now:               deps.Now,
	}
	if g.spKey != nil {
		g.v.spKey = g.spKey
	}
	g.meta = &metadataSource{url: s.IDPMetadataURL, file: s.IDPMetadataFile, client: deps.HTTPClient, log: g.log, now: deps.Now}
	if f := s.IDPMetadataSigningCertificateFile; f != "" {
		if g.meta.trust, err = LoadCertificates(f); err != nil {
			g.Close()
			return nil, fmt.Errorf("sdk.saml.idp_metadata_signing_certificate_file: %w", err)
		}
	}
	if s.IDPMetadataFile != "" {
		if err := g.meta.loadFile(); err != nil {
			g.Close()
			return nil, err
		}
	}
	m := deps.MeterProvider.Meter("github.com/svc-dev/svc/samlgw")
	if g.outcomes, err = m.Int64Counter("svc.saml.acs",
		metric.WithDescription("SAML assertions received at the ACS, by result and reason.")); err != nil {
		g.Close()
		return nil, err
	}
	if g.busy, err = m.Int64Counter("svc.saml.acs.busy",
		metric.WithDescription("ACS posts answered saml-busy, by the bound that refused them (reason: client-budget, client-busy, lane-budget, lane-full, timeout, client-gone) and lane (small, large).")); err != nil {
		g.Close()
		return nil, err
	}
	if skipSig {
		g.log.Warn("SVC_ENV=development: SAML SIGNATURES ARE NOT VERIFIED; any party that reaches the sign-in listener can sign in as anyone. Every other check still runs. It is refused unless every listener is on loopback and [sdk.saml] is the only identity source",
			"listen", deps.ListenAddr)
	}
	return g, nil
}

// DevEnv reports whether the environment (getenv, usually os.Getenv)
// turns off the signature checks of a gateway of cfg served on listen
// (DevEnvVar, see Deps.ListenAddr), and refuses that outside a local
// trial with a *config.Error naming the variable and the listener or
// setting that makes the configuration a production one. New applies
// it; svc-sidecar also checks a configuration read again on SIGHUP with
// it, before handing over to an image that would fail to start.
func DevEnv(cfg config.Config, listen string, getenv func(string) string) (bool, error) {
	if cfg.SDK.SAML == nil || getenv(DevEnvVar) != DevEnvValue {
		return false, nil
	}
	why := localTrial(cfg, listen)
	if why == "" {
		return true, nil
	}
	return false, DevEnvRefusal(why)
}

// DevEnvRefusal is the error that refuses DevEnvVar in a production
// configuration, why naming what makes it one
// (config.Config.ProductionSetting).
func DevEnvRefusal(why string) error {
	return &config.Error{Source: DevEnvVar, Msg: fmt.Sprintf(
		"%q turns off SAML signature verification and is accepted only in %s; here %s; unset %s",
		DevEnvValue, config.LocalTrialRule(), why, DevEnvVar)}
}

// localTrial names what makes cfg, with the gateway served on listen, a
// production configuration (config.Config.ProductionSetting, then the
// gateway's own listener); "" when it is a local trial, which only this
// host can reach.
func localTrial(cfg config.Config, listen string) string {
	if why := cfg.ProductionSetting(); why != "" {
		return why
	}
	switch {
	case listen == "":
		return "the listener that serves the gateway is not known (samlgw.Deps.ListenAddr is empty)"
	case !loopback.ListenAddr(listen):
		return fmt.Sprintf("the listener that serves the gateway %q (samlgw.Deps.ListenAddr) is not a loopback address", listen)
	}
	return ""
}

// Close releases the Redis client the Gateway created, if any.
func (g *Gateway) Close() error {
	if g.redis != nil {
		return g.redis.Close()
	}
	return nil
}

// Run refreshes the IdP metadata from idp_metadata_url until ctx ends.
func (g *Gateway) Run(ctx context.Context) error {
	if g.tokenKeyEphemeral() {
		g.log.Warn("sdk.saml.token_signing_key_file is not set: the token key was generated at start, so every restart signs everyone out and other replicas refuse these sessions; " +
			"make one with: openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out saml-token-key.pem")
	}
	g.meta.run(ctx)
	return nil
}

// Status is what /v1/status shows of the gateway: the local API's shape
// (package wire), filled here.
type Status = wire.SAMLStatus

// Status returns a snapshot of the gateway's state.
func (g *Gateway) Status() Status {
	return Status{
		EntityID: g.cfg.EntityID, ACSURL: g.cfg.ACSURL,
		SignatureCheckDisabled: g.v.skipSignature,
		AllowIDPInitiated:      g.cfg.AllowIDPInitiated,
		IDPMetadata:            g.meta.status(),
		TokenKeyID:             g.issuer.KeyID(),
		TokenKeyGenerated:      g.issuer.Generated(),
		TokenKeyEphemeral:      g.tokenKeyEphemeral(),
	}
}

// tokenKeyEphemeral: the token key was generated at start, outside
// development mode.
func (g *Gateway) tokenKeyEphemeral() bool {
	return g.issuer.Generated() && !g.v.skipSignature
}

// countBusy counts a saml-busy refusal by its bound and lane.
func (g *Gateway) countBusy(ctx context.Context, err error) {
	reason, lane := busyCause(err)
	g.busy.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", string(reason)), attribute.String("lane", lane))))
}

func (g *Gateway) count(ctx context.Context, code Code) {
	result := "refused"
	if code == "" {
		result = "accepted"
	}
	g.outcomes.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(attribute.String("result", result), attribute.String("reason", string(code)))))
}

// loadSPKeyPair reads the SP key pair from its files or from the PEM text
// the environment gave; both nil when none is configured.
func loadSPKeyPair(s config.SAML) (crypto.Signer, *x509.Certificate, error) {
	keyPEM, certPEM := []byte(s.SPPrivateKeyPEM), []byte(s.SPCertificatePEM)
	var err error
	if s.SPPrivateKeyFile != "" {
		if keyPEM, err = os.ReadFile(s.SPPrivateKeyFile); err != nil {
			return nil, nil, fmt.Errorf("sdk.saml.sp_private_key_file: %w", err)
		}
	}
	if s.SPCertificateFile != "" {
		if certPEM, err = os.ReadFile(s.SPCertificateFile); err != nil {
			return nil, nil, fmt.Errorf("sdk.saml.sp_certificate_file: %w", err)
		}
	}
	if len(keyPEM) == 0 {
		return nil, nil, nil
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("SP private key: %w", err)
	}
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, nil, errors.New("SP certificate: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("SP certificate: %w", err)
	}
	return key, cert, nil
}

func parsePrivateKey(data []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block")
	}
	var (
		k   any
		err error
	)
	switch b.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		k, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("unexpected PEM block %q", b.Type)
	}
	if err != nil {
		return nil, err
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return k, nil
	}
	return nil, errors.New("the key is neither RSA nor ECDSA")
}
