package oidcgw

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// A sign-in is bound to the browser that started it (login CSRF): login
// lists its state in the browser's state cookie, and the callback
// refuses (oidc-state-not-bound) a state the browser's cookie does not
// list. Without it, an attacker could start a sign-in with their own
// account, stop before the callback, and have a victim's browser follow
// their callback URL: the victim would be signed in as the attacker.
// The provider sends the browser back with a top-level GET, which
// carries SameSite=Lax cookies, so the cookie is Lax. Wherever the
// gateway's cookies are Secure it is "__Host-" prefixed (Path=/, as the
// prefix requires); on plain http on loopback it keeps Path=<prefix>.
//
// What the callback needs (provider, PKCE verifier, nonce, return_to) is
// kept server-side under a hash of the state and taken from the store
// once (GETDEL in Redis): a state, and the code that answers it, are
// used once whatever the provider does.

// maxBoundStates is how many pending sign-ins one browser keeps (several
// tabs, a login clicked twice); the oldest goes first.
const maxBoundStates = 4

// stateLen is the random bytes of a state, nonce and verifier seed.
const stateLen = 32

// pending is a sign-in started by login and awaiting its callback.
type pending struct {
	Provider string `json:"p"`
	Verifier string `json:"v"`
	Nonce    string `json:"n"`
	ReturnTo string `json:"r"`
}

func randomToken() string {
	b := make([]byte, stateLen)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// stateKey is the store key of a state: a hash, so that the store (or
// whoever reads Redis) does not hold usable states.
func stateKey(state string) string {
	h := sha256.Sum256([]byte(state))
	return "svc:oidc:state:" + hex.EncodeToString(h[:])
}

// validState: the shape of a state this gateway mints (base64url of
// stateLen bytes); anything else is not looked up.
func validState(s string) bool {
	if len(s) != base64.RawURLEncoding.EncodedLen(stateLen) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil
}

func (g *Gateway) savePending(ctx context.Context, state string, p pending) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return g.pending.Put(ctx, stateKey(state), b, StateTTL)
}

// takePending returns the sign-in of state and forgets it; nil when
// there is none (expired, used, never minted).
func (g *Gateway) takePending(ctx context.Context, state string) (*pending, error) {
	b, err := g.pending.Take(ctx, stateKey(state))
	if err != nil || b == nil {
		return nil, err
	}
	var p pending
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func (g *Gateway) stateCookieName() string {
	return g.jar.Name(g.session.CookieName + StateCookieSuffix)
}

func (g *Gateway) stateCookiePath() string {
	if g.jar.Secure {
		return "/"
	}
	return g.cfg.PathPrefix
}

// ParseStateCookie returns the states a state cookie value lists: at most
// maxBoundStates, each of the shape the gateway mints; others are
// dropped.
func ParseStateCookie(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ".") {
		if len(out) == maxBoundStates {
			break
		}
		if validState(s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// boundStates returns the states the request's state cookie lists.
// Where the cookie is prefixed, an unprefixed one proves nothing.
func (g *Gateway) boundStates(r *http.Request) []string {
	c, err := r.Cookie(g.stateCookieName())
	if err != nil {
		return nil
	}
	return ParseStateCookie(c.Value)
}

// bindState adds state to the browser's state cookie, first.
func (g *Gateway) bindState(w http.ResponseWriter, r *http.Request, state string) {
	states := append([]string{state}, g.boundStates(r)...)
	g.setStateCookie(w, states[:min(len(states), maxBoundStates)])
}

// unbindState removes an answered state from the cookie.
func (g *Gateway) unbindState(w http.ResponseWriter, r *http.Request, state string) {
	g.setStateCookie(w, slices.DeleteFunc(g.boundStates(r), func(s string) bool { return s == state }))
}

func (g *Gateway) setStateCookie(w http.ResponseWriter, states []string) {
	if len(states) == 0 {
		g.jar.Clear(w, g.stateCookieName(), g.stateCookiePath(), http.SameSiteLaxMode)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: g.stateCookieName(), Value: strings.Join(states, "."), Path: g.stateCookiePath(),
		MaxAge: int(StateTTL.Seconds()), HttpOnly: true, Secure: g.jar.Secure, SameSite: http.SameSiteLaxMode,
	})
}
