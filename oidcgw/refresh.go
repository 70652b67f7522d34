package oidcgw

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"golang.org/x/oauth2"

	"github.com/svc-dev/svc/reason"
)

// Refresh: with offline_access granted, the callback keeps the
// provider's refresh token server-side (in the store: Redis when
// configured), sealed with AES-GCM under a key derived from a random
// handle that only the browser holds, in the refresh cookie
// (<cookie_name>_rt, "__Host-" prefixed where Secure). Whoever reads the
// store cannot use what it holds, and the store key is a hash of the
// handle.
//
// Before the session expires, the checks renew it (renew.go). When it
// has expired, the checks send the browser to login;
// login, seeing a refresh cookie, refreshes instead of starting a
// sign-in. Concurrent requests of one session, on any replica, refresh
// once: the first takes a lock in the store (RefreshLockTTL, longer than
// the provider's slowest answer), the others wait for the session it
// leaves there. A failed refresh ends the session: the refresh cookie
// goes and the browser signs in again.

// RefreshCookieSuffix is appended to sdk.session.cookie_name to name the
// refresh cookie.
const RefreshCookieSuffix = "_rt"

// RefreshLockTTL bounds a refresh: the lock outlives the provider
// client's timeout, so a slow provider never lets a second refresh in.
const RefreshLockTTL = 30 * time.Second

// refreshTTL is how long a refresh handle lives unused.
const refreshTTL = 30 * 24 * time.Hour

// refreshed is how long the session a refresh produced stays for the
// requests that waited on it.
const refreshed = 30 * time.Second

// refreshState is what the store holds of a refreshable session.
type refreshState struct {
	Provider string         `json:"p"`
	Sealed   []byte         `json:"t"` // the refresh token, sealed
	Claims   map[string]any `json:"c"` // the session's claims
}

func refreshKey(kind, handle string) string {
	h := sha256.Sum256([]byte("svc oidc refresh\x00" + handle))
	return "svc:oidc:refresh:" + kind + ":" + hex.EncodeToString(h[:])
}

func sealer(handle string) (cipher.AEAD, error) {
	k := sha256.Sum256([]byte("svc oidc refresh key\x00" + handle))
	return newGCM(k[:])
}

func seal(handle, token string) ([]byte, error) {
	a, err := sealer(handle)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, a.NonceSize())
	_, _ = rand.Read(nonce)
	return a.Seal(nonce, nonce, []byte(token), nil), nil
}

func unseal(handle string, sealed []byte) (string, error) {
	a, err := sealer(handle)
	if err != nil {
		return "", err
	}
	if len(sealed) < a.NonceSize() {
		return "", errors.New("sealed refresh token too short")
	}
	b, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], nil)
	return string(b), err
}

func (g *Gateway) refreshCookieName() string {
	return g.jar.Name(g.session.CookieName + RefreshCookieSuffix)
}

// keepRefresh stores tok's refresh token for the session of claims and
// hands the browser its handle; nothing without a refresh token.
func (g *Gateway) keepRefresh(ctx context.Context, w http.ResponseWriter, provider string, tok *oauth2.Token, claims map[string]any) error {
	if tok.RefreshToken == "" {
		return nil
	}
	handle := randomToken()
	sealed, err := seal(handle, tok.RefreshToken)
	if err != nil {
		return err
	}
	b, err := json.Marshal(refreshState{Provider: provider, Sealed: sealed, Claims: claims})
	if err != nil {
		return err
	}
	if err := g.store.Put(ctx, refreshKey("state", handle), b, refreshTTL); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: g.refreshCookieName(), Value: handle, Path: "/", MaxAge: int(refreshTTL.Seconds()),
		HttpOnly: true, Secure: g.jar.Secure, SameSite: http.SameSiteLaxMode})
	return nil
}

// refresh renews the session of the request's refresh cookie: ok false
// when there is none to renew (no cookie, unknown handle); an error when
// the provider refused, which ends the session.
func (g *Gateway) refresh(ctx context.Context, r *http.Request) (token string, exp time.Time, ok bool, err error) {
	c, cerr := r.Cookie(g.refreshCookieName())
	if cerr != nil || !validState(c.Value) {
		return "", time.Time{}, false, nil
	}
	handle := c.Value
	// Another request of this session may have refreshed it already.
	if tok, exp, ok := g.refreshedSession(ctx, handle); ok {
		return tok, exp, true, nil
	}
	mine, err := g.store.Lock(ctx, refreshKey("lock", handle), RefreshLockTTL)
	if err != nil {
		return "", time.Time{}, false, reason.Wrap(reason.OIDCStoreUnavailable, err, "the refresh could not be coordinated")
	}
	if !mine {
		return g.awaitRefresh(ctx, handle)
	}
	// Released when done, after the session is left for the waiters (or
	// at once when the refresh failed, which ends their wait).
	defer func() { _, _ = g.store.Take(context.WithoutCancel(ctx), refreshKey("lock", handle)) }()
	// A refresh may have ended between the read and the lock.
	if tok, exp, ok := g.refreshedSession(ctx, handle); ok {
		return tok, exp, true, nil
	}
	raw, err := g.store.Take(ctx, refreshKey("state", handle))
	if err != nil || raw == nil {
		return "", time.Time{}, false, err
	}
	var st refreshState
	if err := json.Unmarshal(raw, &st); err != nil {
		return "", time.Time{}, false, err
	}
	if err := g.redeem(ctx, handle, &st); err != nil {
		return "", time.Time{}, false, err
	}
	if b, err := json.Marshal(st); err == nil {
		_ = g.store.Put(ctx, refreshKey("state", handle), b, refreshTTL)
	}
	session, sexp, err := g.issuer.Issue(st.Claims)
	if err != nil {
		return "", time.Time{}, false, reason.Wrap(reason.OIDCInternal, err, "the session could not be issued")
	}
	b, _ := json.Marshal(renewed{T: session, E: sexp})
	_ = g.store.Put(ctx, refreshKey("done", handle), b, refreshed)
	return session, sexp, true, nil
}

// refreshedSession is the session a refresh of handle left for the
// requests that waited on it.
func (g *Gateway) refreshedSession(ctx context.Context, handle string) (string, time.Time, bool) {
	d, err := g.lastRenewal(ctx, handle)
	if err != nil || d.T == "" || !g.now().Before(d.E) {
		return "", time.Time{}, false
	}
	return d.T, d.E, true
}

// awaitRefresh waits for the refresh another request holds the lock of.
func (g *Gateway) awaitRefresh(ctx context.Context, handle string) (string, time.Time, bool, error) {
	deadline := time.Now().Add(RefreshLockTTL)
	for time.Now().Before(deadline) {
		if tok, exp, ok := g.refreshedSession(ctx, handle); ok {
			return tok, exp, true, nil
		}
		if held, err := g.store.Has(ctx, refreshKey("lock", handle)); err == nil && !held {
			break // the refresh ended without a session: it failed
		}
		select {
		case <-ctx.Done():
			return "", time.Time{}, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if tok, exp, ok := g.refreshedSession(ctx, handle); ok {
		return tok, exp, true, nil
	}
	return "", time.Time{}, false, reason.New(reason.OIDCRefreshFailed, "the session could not be refreshed")
}

// endRefresh drops the browser's refresh cookie.
func (g *Gateway) endRefresh(w http.ResponseWriter) {
	g.jar.Clear(w, g.refreshCookieName(), "/", http.SameSiteLaxMode)
}
