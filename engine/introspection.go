package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/svc-dev/svc/internal/secretfile"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/introspect"
	"github.com/svc-dev/svc/reason"
)

// introspectionTimeout bounds one call to the introspection endpoint.
const introspectionTimeout = 5 * time.Second

// readClientSecret reads introspection.client_secret_file (see
// secretfile.Read). Errors name the setting, never the secret.
func readClientSecret(cfg config.Config) (string, error) {
	const key = "introspection.client_secret_file"
	s, err := secretfile.Read(key, cfg.Introspection.ClientSecretFile)
	if err != nil {
		err = errors.Unwrap(err)
		return "", &SettingError{Key: key, Origin: cfg.Origin(key), Msg: err.Error(), Err: err}
	}
	return s, nil
}

// newIntrospector sets up the introspection client of [introspection].
// Its shared tier is added by shareIntrospection, once the Redis client
// exists.
func (e *Engine) newIntrospector(client *http.Client) error {
	in := e.cfg.Introspection
	secret, err := readClientSecret(e.cfg)
	if err != nil {
		return err
	}
	if client == nil {
		client = &http.Client{Timeout: introspectionTimeout}
	}
	e.introspector, err = introspect.New(introspect.Options{
		URL:          in.URL,
		ClientID:     in.ClientID,
		ClientSecret: secret,
		TenantClaim:  in.TenantClaim,
		CacheTTL:     in.CacheTTL.Duration,
		NegativeTTL:  in.NegativeCacheTTL.Duration,
		Skew:         e.cfg.JWT.ClockSkew.Duration,
		CacheSize:    e.cfg.JWT.CacheSize,
		Timeout:      introspectionTimeout,
		HTTPClient:   client,
		Derive:       deriveIntrospectedUser,
		Now:          e.now,
	})
	if err != nil {
		return &SettingError{Key: "introspection.url", Origin: e.cfg.Origin("introspection.url"), Msg: err.Error(), Err: err}
	}
	e.log.Info("introspection endpoint configured", "url", in.URL, "client_id", in.ClientID)
	return nil
}

// shareIntrospection makes the Redis of rate_limit.redis_addr (the
// client openRedis made) the second cache tier of introspection answers,
// which the replicas share.
func (e *Engine) shareIntrospection() {
	if e.introspector == nil || e.redis == nil {
		return
	}
	e.introspector.UseRemote(introspect.Redis{Client: e.redis, Timeout: e.cfg.RateLimit.RedisTimeout.Duration})
}

// verifyOpaque judges a bearer that is not a JWS by what the
// introspection endpoint says of it.
func (e *Engine) verifyOpaque(ctx context.Context, raw string) (TokenDecision, *principal) {
	a, err := e.introspector.Introspect(ctx, raw)
	if err != nil {
		code := reason.Of(err, reason.IntrospectionUnavailable)
		msg := "token rejected"
		if re, ok := err.(*reason.Error); ok {
			msg = re.Msg
		}
		if reason.Unjudged(code) && ctx.Err() == nil {
			// A request that ended while it waited says nothing of the
			// endpoint.
			e.warnIntrospection(ctx, err)
		}
		return TokenDecision{Reason: code, Message: msg}, nil
	}
	if want := e.cfg.JWT.Audiences; len(want) > 0 && !slices.ContainsFunc(a.Audiences, func(aud string) bool { return slices.Contains(want, aud) }) {
		// jwt.audiences names this service whatever the token's shape: a
		// token the provider issued for another service is not for it.
		return TokenDecision{Reason: reason.AudienceMismatch, Message: "introspection answer's aud holds none of jwt.audiences"}, nil
	}
	if a.Tenant == "" {
		return TokenDecision{Reason: reason.TenantMissing,
			Message: fmt.Sprintf("introspection answer has no %s", e.cfg.Introspection.TenantClaim)}, nil
	}
	p := derivedPrincipal(a.Derived)
	return TokenDecision{Allowed: true, Claims: a.Claims, Reason: reason.OK, Subject: a.Subject, TenantID: a.Tenant,
		Kind: KindIntrospection}, p
}

// warnIntrospection logs a failing endpoint at most once per
// limiterWarnEvery, so that an outage does not write a line per request.
// The error names the endpoint and the failure, never the token.
func (e *Engine) warnIntrospection(ctx context.Context, err error) {
	if e.introspectWarned.Allow(e.now(), limiterWarnEvery) {
		e.log.WarnContext(ctx, "introspection endpoint failing; tokens without a still-valid cached answer are refused",
			"url", e.cfg.Introspection.URL, "err", err, "next_warning_in", limiterWarnEvery.String())
	}
}

// deriveIntrospectedUser is the introspect.Options.Derive of the engine:
// the policy input's principal of an active answer, built once per
// answer, of kind introspection and issued by the answer's iss. Its
// roles are the answer's roles, or else its scope values.
func deriveIntrospectedUser(a *introspect.Answer) any {
	u := userFrom(TokenDecision{Claims: a.Claims, Subject: a.Subject, TenantID: a.Tenant})
	u.Roles = a.Roles
	if u.Role == "" && len(u.Roles) > 0 {
		u.Role = u.Roles[0]
	}
	iss, _ := a.Claims["iss"].(string)
	return newPrincipal(KindIntrospection, iss, "", u)
}

// IntrospectionStatus is the state of the introspection client.
type IntrospectionStatus struct {
	// URL is introspection.url.
	URL string `json:"url"`
	// Shared is true when answers are also cached in Redis.
	Shared bool `json:"shared"`
	// CacheEntries is the size of the in-process cache.
	CacheEntries int `json:"cache_entries"`
	// Calls counts the calls to the endpoint; Failures those that did
	// not bring an answer (unreachable, not 200, not an RFC 7662 answer).
	Calls    uint64 `json:"calls"`
	Failures uint64 `json:"failures"`
	// LastError is the last failure, and LastErrorAt when it happened.
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitempty"`
}

func (e *Engine) introspectionStatus() *IntrospectionStatus {
	if e.introspector == nil {
		return nil
	}
	s := e.introspector.Stats()
	st := &IntrospectionStatus{
		URL: e.introspector.URL(), Shared: e.introspector.Shared(), CacheEntries: s.Entries,
		Calls:    s.Active + s.Inactive + s.Unavailable + s.Invalid,
		Failures: s.Unavailable + s.Invalid,
	}
	st.LastError, st.LastErrorAt = e.introspector.LastError()
	return st
}
