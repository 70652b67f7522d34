package oidcgw

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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
// Beside each state the cookie holds its pending sign-in, sealed
// (pending.go): "state:sealed", newest first, joined by ".".

// maxBoundStates is how many pending sign-ins one browser keeps (several
// tabs, a login clicked twice); the oldest goes first.
const maxBoundStates = 4

// maxStateCookieLen bounds the state cookie's name and value together,
// below the 4096 bytes browsers keep of a cookie. Four pending sign-ins
// always fit when each return_to is at most maxReturnToFitsFour bytes;
// with longer ones the cookie keeps fewer of them (the newest, which
// always fits), and the callbacks of those pushed out answer
// oidc-state-not-bound.
const maxStateCookieLen = 4000

// maxReturnToFitsFour is the longest return_to of which maxBoundStates
// pending sign-ins fit in the state cookie (with a provider name of up
// to 64 bytes and a cookie name of up to 64).
const maxReturnToFitsFour = 512

// stateLen is the random bytes of a state, nonce and verifier.
const stateLen = 32

// boundState is a state the state cookie lists, with its pending
// sign-in sealed ("" when the entry has none).
type boundState struct {
	state, sealed string
}

func randomToken() string {
	b := make([]byte, stateLen)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// usedStateKey is the store key that records a state as answered: a
// hash, so that the store (or whoever reads Redis) holds no usable
// state.
func usedStateKey(state string) string {
	h := sha256.Sum256([]byte(state))
	return "svc:oidc:state-used:" + hex.EncodeToString(h[:])
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

func (g *Gateway) stateCookieName() string {
	return g.jar.Name(g.session.CookieName + StateCookieSuffix)
}

func (g *Gateway) stateCookiePath() string {
	if g.jar.Secure {
		return "/"
	}
	return g.cfg.PathPrefix
}

// parseStateCookie returns the entries a state cookie value lists: at
// most maxBoundStates, each with a state of the shape the gateway mints;
// others are dropped. What an entry holds beside its state is left to
// the opener.
func parseStateCookie(v string) []boundState {
	var out []boundState
	for e := range strings.SplitSeq(v, ".") {
		if len(out) == maxBoundStates {
			break
		}
		state, sealed, _ := strings.Cut(e, ":")
		if validState(state) && boundIndex(out, state) < 0 {
			out = append(out, boundState{state: state, sealed: sealed})
		}
	}
	return out
}

// boundIndex returns the index of state in states, -1 when it is not
// there.
func boundIndex(states []boundState, state string) int {
	return slices.IndexFunc(states, func(b boundState) bool { return b.state == state })
}

// boundStates returns the entries of the request's state cookie. Where
// the cookie is prefixed, an unprefixed one proves nothing.
func (g *Gateway) boundStates(r *http.Request) []boundState {
	c, err := r.Cookie(g.stateCookieName())
	if err != nil {
		return nil
	}
	return parseStateCookie(c.Value)
}

// bindState adds state and its sealed sign-in to the browser's state
// cookie, first.
func (g *Gateway) bindState(w http.ResponseWriter, r *http.Request, state, sealed string) {
	g.setStateCookie(w, append([]boundState{{state: state, sealed: sealed}}, g.boundStates(r)...))
}

// unbindState removes an answered state from the cookie.
func (g *Gateway) unbindState(w http.ResponseWriter, r *http.Request, state string) {
	g.setStateCookie(w, slices.DeleteFunc(g.boundStates(r), func(b boundState) bool { return b.state == state }))
}

// setStateCookie sets the cookie to the first of states that fit: at most
// maxBoundStates, within maxStateCookieLen (the first always).
func (g *Gateway) setStateCookie(w http.ResponseWriter, states []boundState) {
	if len(states) == 0 {
		g.jar.Clear(w, g.stateCookieName(), g.stateCookiePath(), http.SameSiteLaxMode)
		return
	}
	name := g.stateCookieName()
	var v strings.Builder
	for i, s := range states[:min(len(states), maxBoundStates)] {
		entry := s.state + ":" + s.sealed
		if i > 0 && len(name)+v.Len()+1+len(entry) > maxStateCookieLen {
			break
		}
		if i > 0 {
			v.WriteByte('.')
		}
		v.WriteString(entry)
	}
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: v.String(), Path: g.stateCookiePath(),
		MaxAge: int(StateTTL.Seconds()), HttpOnly: true, Secure: g.jar.Secure, SameSite: http.SameSiteLaxMode,
	})
}
