package oidcgw

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/svc-dev/svc/reason"
)

// BackchannelLogoutEvent is the member of a logout token's events claim
// that makes it one (OpenID Connect Back-Channel Logout 1.0).
const BackchannelLogoutEvent = "http://schemas.openid.net/event/backchannel-logout"

// A verified logout token revokes what it names (OpenID Connect
// Back-Channel Logout 1.0 §2.6): with a sid, that provider session alone,
// whatever sub it also carries; with a sub alone, every session of the
// user at that provider that was signed in by the time of the logout
// (the session's auth_time), never a later sign-in. The revocation is
// kept for the session lifetime (token_ttl, the longest a session token
// it names can still be presented) in the store, Redis when configured
// so that every replica sees it, else this process's memory (status:
// logout_scope).
//
// A logout token is taken once. It must have been issued (iat) within
// LogoutTokenMaxAge, give or take jwt.clock_skew, and its jti (or, for a
// provider that sends none, its claims) is remembered for as long as it
// could be taken, so that a captured token posted again does nothing:
// its logout is done, and the answer is 200 as for the first post, since
// a provider may resend a token it did not see answered. The time a
// logout by sub records is the token's iat (at most jwt.clock_skew
// later), not the moment it arrived: a token resent after a failure, or
// replayed where its jti is not remembered (another process's memory, a
// restart), never ends a session signed in after the logout.
//
// A logout at the gateway, or a refresh its provider refuses, ends the
// session of the token it holds: every token minted for one sign-in
// carries the same random session id (SessionIDClaim), kept by every
// renewal, and that id is revoked, so that a copy of a token renewed
// away is refused as the last one is. A token minted before session ids
// has none: its own jti is revoked.

// SessionIDClaim names the claim of a session token that says which
// sign-in it belongs to: random at sign-in, the same in every token a
// renewal mints for it. Apart from the provider's session (idp_sid),
// which several sign-ins may share.
const SessionIDClaim = "session_id"

// LogoutTokenMaxAge is how long after it was issued (its iat, give or
// take jwt.clock_skew) a logout token is taken. A provider sends it at
// once; the bound leaves room for a few resends after a failure, and
// bounds how long its jti must be remembered.
const LogoutTokenMaxAge = 5 * time.Minute

// LogoutClaims are the claims of a logout token that the gateway reads.
type LogoutClaims struct {
	Issuer string         `json:"iss"`
	Sub    string         `json:"sub"`
	SID    string         `json:"sid"`
	JTI    string         `json:"jti"`
	Nonce  *string        `json:"nonce"`
	Events map[string]any `json:"events"`
}

// ParseLogoutClaims checks the shape of a logout token's (verified)
// payload: the back-channel logout event, sid or sub, and no nonce (so
// that an ID token cannot pass for one).
func ParseLogoutClaims(payload []byte) (LogoutClaims, error) {
	var c LogoutClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return c, errors.New("the payload is not a JSON object of the expected types")
	}
	if _, ok := c.Events[BackchannelLogoutEvent]; !ok {
		return c, errors.New("events lacks " + BackchannelLogoutEvent)
	}
	if c.Nonce != nil {
		return c, errors.New("a logout token must not carry a nonce")
	}
	if c.SID == "" && c.Sub == "" {
		return c, errors.New("neither sid nor sub is set")
	}
	return c, nil
}

// tokenIssuer reads the iss of a compact JWS without verifying it, to
// pick the provider whose keys verify it; "" when it has none.
func tokenIssuer(raw string) string {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 || len(parts[1]) > 16<<10 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Iss
}

func revokedKey(kind, iss, v string) string {
	h := sha256.Sum256([]byte(iss + "\x00" + v))
	return "svc:oidc:revoked:" + kind + ":" + hex.EncodeToString(h[:])
}

// serveBackchannelLogout takes a logout token from a provider (a form
// post with logout_token) and revokes what it names. 200 when done, or
// done already (a token taken before); 400 oidc-logout-token-invalid
// when it does not verify or is not fresh.
func (g *Gateway) serveBackchannelLogout(w http.ResponseWriter, r *http.Request) {
	err := g.backchannelLogout(w, r)
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		args := []any{"reason", string(CodeOf(err))}
		if e := errors.Unwrap(err); e != nil {
			args = append(args, "err", e.Error())
		}
		g.log.Warn("OpenID Connect back-channel logout refused", args...)
		g.writeRefusal(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (g *Gateway) backchannelLogout(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return refuse(reason.OIDCLogoutTokenInvalid, "the body is not a form of at most %d bytes", maxFormBytes)
	}
	raw := r.PostForm.Get("logout_token")
	p, tok, err := g.verifyLogoutToken(r.Context(), raw)
	if err != nil {
		return err
	}
	var payload json.RawMessage
	if err := tok.Claims(&payload); err != nil {
		return reason.Wrap(reason.OIDCLogoutTokenInvalid, err, "the logout token's claims cannot be read")
	}
	c, err := ParseLogoutClaims(payload)
	if err != nil {
		return reason.Wrap(reason.OIDCLogoutTokenInvalid, err, "this is not a logout token")
	}
	if err := g.checkIssuedAt(tok.IssuedAt); err != nil {
		return err
	}
	ctx := r.Context()
	taken := logoutTokenKey(p.cfg.Name, c.JTI, payload)
	first, err := g.store.Lock(ctx, taken, g.takenFor(tok))
	if err != nil {
		return reason.Wrap(reason.OIDCStoreUnavailable, err, "the logout could not be recorded")
	}
	if !first {
		// Its logout is done: nothing is recorded again, least of all a
		// later time for a logout by sub.
		g.log.Warn("OpenID Connect back-channel logout token already taken; nothing done again",
			"reason", string(reason.OIDCLogoutTokenReplayed), "provider", p.cfg.Name)
		return nil
	}
	if err := g.revoke(ctx, p.cfg.Name, c, tok.IssuedAt); err != nil {
		// Forgotten, so that the provider's resend of the token is taken.
		_, _ = g.store.Take(context.WithoutCancel(ctx), taken)
		return reason.Wrap(reason.OIDCStoreUnavailable, err, "the logout could not be recorded")
	}
	g.log.Info("OpenID Connect back-channel logout", "provider", p.cfg.Name, "by_sid", c.SID != "")
	return nil
}

// checkIssuedAt refuses a logout token without an iat (required, §2.4),
// or one issued more than LogoutTokenMaxAge ago or in the future, give
// or take jwt.clock_skew.
func (g *Gateway) checkIssuedAt(iat time.Time) error {
	now := g.now()
	switch {
	case iat.IsZero():
		return refuse(reason.OIDCLogoutTokenInvalid, "the logout token has no iat")
	case iat.After(now.Add(g.skew)):
		return refuse(reason.OIDCLogoutTokenInvalid, "the logout token was issued in the future (iat), beyond jwt.clock_skew (%s)", g.skew)
	case iat.Before(now.Add(-LogoutTokenMaxAge - g.skew)):
		return refuse(reason.OIDCLogoutTokenInvalid, "the logout token was issued more than %s ago (iat)", LogoutTokenMaxAge)
	}
	return nil
}

// takenFor is how long a logout token that passed checkIssuedAt must be
// remembered: as long as it could be taken again, until its exp or the
// end of its LogoutTokenMaxAge, whichever comes first.
func (g *Gateway) takenFor(tok *oidc.IDToken) time.Duration {
	until := tok.IssuedAt.Add(LogoutTokenMaxAge + g.skew)
	if tok.Expiry.Before(until) {
		until = tok.Expiry
	}
	// The verifier takes a token in the second of its exp.
	return max(until.Sub(g.now())+time.Second, time.Second)
}

// logoutTokenKey is the store key that remembers a logout token of
// provider: by its jti, else by a hash of its claims (its payload, as
// signed: another signature of the same claims is the same token).
func logoutTokenKey(provider, jti string, payload []byte) string {
	v := "jti\x00" + jti
	if jti == "" {
		h := sha256.Sum256(payload)
		v = "claims\x00" + string(h[:])
	}
	h := sha256.Sum256([]byte(provider + "\x00" + v))
	return "svc:oidc:logout-token:" + hex.EncodeToString(h[:])
}

// endSession ends the session of the request's session cookie, when it
// is one of this gateway's, as a refused refresh ends one
// (revokeSession): clearing the cookie only asks the browser to forget
// it, and a copy of one of its tokens (another tab's request in flight,
// a stolen cookie, a cookie from before a renewal) would otherwise still
// pass every check until it expires. Only a token that verifies is
// recorded, so that a logout cannot be used to fill the store.
func (g *Gateway) endSession(r *http.Request) {
	c, err := r.Cookie(g.jar.SessionName())
	if err != nil || c.Value == "" {
		return
	}
	claims, err := g.sessions.Verify(r.Context(), c.Value)
	if err != nil {
		return
	}
	ended, err := g.revokeSession(context.WithoutCancel(r.Context()), claims)
	if err != nil {
		g.log.Warn("OpenID Connect session could not be revoked at logout", "reason", string(reason.Of(err, reason.OIDCStoreUnavailable)), "err", err.Error())
		return
	}
	if ended {
		g.log.Info("OpenID Connect logout", "provider", claims["idp"])
	}
}

// sessionKey is the revocation key of the session that a token of
// provider with claims belongs to: its session id (SessionIDClaim),
// else, for a token minted before session ids, its own jti; "" when it
// carries neither.
func sessionKey(provider string, claims map[string]any) string {
	if id, _ := claims[SessionIDClaim].(string); id != "" {
		return revokedKey("session", provider, id)
	}
	if jti, _ := claims["jti"].(string); jti != "" {
		return revokedKey("jti", provider, jti)
	}
	return ""
}

// revokeSession ends the session of the token with claims (sessionKey),
// on every replica through Redis; false when the claims name no session
// of this gateway. The record is kept for token_ttl, the longest a token
// of the session can be presented, and RefreshLockTTL more: a refresh
// already under way when the session ends mints one up to that much
// later.
func (g *Gateway) revokeSession(ctx context.Context, claims map[string]any) (bool, error) {
	provider, _ := claims["idp"].(string)
	k := sessionKey(provider, claims)
	if k == "" || g.byName(provider) == nil {
		return false, nil
	}
	if err := g.store.Put(ctx, k, []byte{1}, g.session.TokenTTL.Duration+RefreshLockTTL); err != nil {
		return true, err
	}
	g.notRevoked.forget(k)
	return true, nil
}

// verifyLogoutToken finds the provider of a logout token and verifies
// the token with it. Several providers may be clients of one identity
// provider (one per tenant, at one issuer): the token is for the one its
// aud names, so each provider of its iss is tried in turn.
func (g *Gateway) verifyLogoutToken(ctx context.Context, raw string) (*provider, *oidc.IDToken, error) {
	iss := tokenIssuer(raw)
	var last error
	for _, p := range g.providers {
		if p.cfg.IssuerURL != iss && strings.TrimSuffix(p.cfg.IssuerURL, "/") != strings.TrimSuffix(iss, "/") {
			continue
		}
		if _, err := p.discover(ctx); err != nil {
			last = reason.Wrap(reason.OIDCProviderUnavailable, err, "the identity provider's discovery document could not be read")
			continue
		}
		tok, err := p.verifier().Verify(ctx, raw)
		if err != nil {
			last = reason.Wrap(reason.OIDCLogoutTokenInvalid, err, "the logout token does not verify")
			continue
		}
		return p, tok, nil
	}
	if last == nil {
		last = refuse(reason.OIDCLogoutTokenInvalid, "the logout token is not from a configured provider")
	}
	return nil, nil, last
}

// revoke records the logout of c, a token issued at iat: by sid when it
// has one, else by sub, with the moment of the logout (Unix seconds),
// before which the user's sessions began. That moment is iat, allowing
// for jwt.clock_skew, or now if sooner: a token taken late (a resend,
// a replay) ends no session signed in after it was issued. A later
// logout already on record is kept (tokens may arrive out of order).
func (g *Gateway) revoke(ctx context.Context, provider string, c LogoutClaims, iat time.Time) error {
	ttl := g.session.TokenTTL.Duration
	if c.SID != "" {
		return g.store.Put(ctx, revokedKey("sid", provider, c.SID), []byte{1}, ttl)
	}
	k := revokedKey("sub", provider, c.Sub)
	at := min(g.now().Unix(), iat.Add(g.skew).Unix())
	prev, err := g.store.Get(ctx, k)
	if err != nil {
		return err
	}
	if n, err := strconv.ParseInt(string(prev), 10, 64); err == nil && n >= at {
		return nil
	}
	return g.store.Put(ctx, k, strconv.AppendInt(nil, at, 10), ttl)
}

// revokedByUser reports whether a logout of the user, recorded as at
// (revoke's value), ends a session that began at authTime (ok false:
// the session does not say, so it is taken to have begun before). A
// session that began in the second of the logout ends with it: the
// record keeps whole seconds, and a session that began just before the
// logout must not escape it.
func revokedByUser(at []byte, authTime int64, ok bool) bool {
	logout, err := strconv.ParseInt(string(at), 10, 64)
	if err != nil || !ok {
		// A record without a time ends every session of the user.
		return true
	}
	return authTime <= logout
}

// Revoked reports whether a back-channel logout ended the session whose
// token carries claims (its idp, idp_sid and sub), or a logout at the
// gateway or a refused refresh ended the sign-in it belongs to (its
// session id, or the token itself, by its jti, for a token minted before
// session ids); false for a session of another sign-in. It is asked on
// every check of such a session (engine.Engine.SetSessionRevocation):
// with Redis a "not revoked" answer is reused for revokedCacheTTL, so a
// logout reaches every replica within that time and a session costs
// Redis one lookup a while.
func (g *Gateway) Revoked(ctx context.Context, claims map[string]any) (bool, error) {
	provider, _ := claims["idp"].(string)
	if provider == "" || g.byName(provider) == nil {
		return false, nil
	}
	sid, _ := claims["idp_sid"].(string)
	sub, _ := claims["sub"].(string)
	var keys []string
	if k := sessionKey(provider, claims); k != "" {
		keys = append(keys, k)
	}
	if sid != "" {
		keys = append(keys, revokedKey("sid", provider, sid))
	}
	for _, k := range keys {
		if g.redis != nil && g.notRevoked.fresh(k, g.now()) {
			continue
		}
		ok, err := g.store.Has(ctx, k)
		if ok || err != nil {
			return ok, err
		}
		g.notRevokedFor(k)
	}
	if sub == "" {
		return false, nil
	}
	k := revokedKey("sub", provider, sub)
	if g.redis != nil && g.notRevoked.fresh(k, g.now()) {
		return false, nil
	}
	at, err := g.store.Get(ctx, k)
	if err != nil {
		return false, err
	}
	if at == nil {
		g.notRevokedFor(k)
		return false, nil
	}
	// Only the absence of a record is remembered: whether one ends a
	// session depends on when the session began.
	authTime, ok := numericClaim(claims, "auth_time")
	return revokedByUser(at, authTime, ok), nil
}

// notRevokedFor remembers, with Redis, that no revocation is recorded
// under k, for revokedCacheTTL.
func (g *Gateway) notRevokedFor(k string) {
	if g.redis != nil {
		g.notRevoked.put(k, g.now().Add(revokedCacheTTL))
	}
}

// revokedCacheTTL is how long a replica trusts a "not revoked" answer of
// Redis: the bound on how late a back-channel logout reaches it.
const revokedCacheTTL = 500 * time.Millisecond

// maxNotRevoked bounds the "not revoked" cache; it starts over past it.
const maxNotRevoked = 50_000

// expiryCache remembers keys until an expiry.
type expiryCache struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (c *expiryCache) fresh(k string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.m[k]
	return ok && now.Before(exp)
}

// forget drops k, so that this replica asks the store again at once.
func (c *expiryCache) forget(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

func (c *expiryCache) put(k string, exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxNotRevoked {
		c.m = make(map[string]time.Time)
	}
	c.m[k] = exp
}
