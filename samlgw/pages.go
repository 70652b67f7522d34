package samlgw

import (
	"net/http"
	"net/url"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/refusalpage"
	"github.com/svc-dev/svc/reason"
)

// answerWriter carries the request to the refusals written on it, so that
// a browser gets the HTML page where a program gets the JSON refusal.
type answerWriter struct {
	http.ResponseWriter
	r *http.Request
	g *Gateway
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// writePage answers a refusal with the HTML page when w is an
// answerWriter whose request prefers text/html; false when it did not.
func writePage(w http.ResponseWriter, status int, rf refusal) bool {
	aw, ok := w.(*answerWriter)
	if !ok || !refusalpage.PrefersHTML(aw.r.Header.Get("Accept")) {
		return false
	}
	p := refusalpage.Page{Status: status, Message: refusalMessage(rf.Error), Reason: string(rf.Error)}
	if signInHelps(rf.Error) {
		p.SignInURL = aw.g.loginURL(aw.signInReturnTo())
	}
	refusalpage.Write(w, p)
	return true
}

// signInReturnTo is the page a new sign-in should come back to: the
// RelayState of a refused ACS post, the return_to of a refused login; ""
// (default_return_to) for any other.
func (w *answerWriter) signInReturnTo() string {
	r := w.r
	var s string
	switch {
	case r.PostForm != nil: // parsed by the ACS; never parsed here
		s = r.PostForm.Get("RelayState")
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		s = r.URL.Query().Get("return_to")
	}
	if t, ok := config.ReturnToPath(s); ok {
		return t
	}
	return ""
}

// loginURL is the login endpoint, with return_to when one is given.
func (g *Gateway) loginURL(returnTo string) string {
	u := g.cfg.PathPrefix + PathLogin
	if returnTo != "" {
		u += "?return_to=" + url.QueryEscape(returnTo)
	}
	return u
}

// returnTo checks a return_to or RelayState (config.ReturnToPath):
// default_return_to when empty.
func (g *Gateway) returnTo(s string) (string, bool) {
	t, ok := config.ReturnToPath(s)
	if ok && t == "" {
		t = g.defaultReturnTo()
	}
	return t, ok
}

// defaultReturnTo is sdk.saml.default_return_to, "/" when unset.
func (g *Gateway) defaultReturnTo() string {
	if g.cfg.DefaultReturnTo == "" {
		return config.DefaultSAMLReturnTo
	}
	return g.cfg.DefaultReturnTo
}

// signInHelps reports whether signing in again can end a refusal: a
// response that came too late, too early or twice, a sign-on that failed
// at the IdP or a page that is not an endpoint. Not a refusal of the IdP's
// configuration (signature, issuer, audience) nor of the user (tenant).
func signInHelps(c Code) bool {
	switch c {
	case reason.SAMLExpired, reason.SAMLNotYetValid, reason.SAMLRequestUnknown, reason.SAMLReplayed, reason.SAMLUnsolicited, reason.SAMLStatusFailure,
		reason.SAMLNotFound, reason.SAMLMethodNotAllowed, reason.SAMLBadReturnTo, reason.SAMLIDPUnavailable, reason.SAMLStoreUnavailable, reason.SAMLInternal:
		return true
	}
	return false
}

// refusalMessage says what happened, in one sentence for a person.
func refusalMessage(c Code) string {
	switch c {
	case reason.SAMLExpired:
		return "This sign-in took too long and has expired."
	case reason.SAMLNotYetValid:
		return "This sign-in is not valid yet; the clocks may disagree."
	case reason.SAMLRequestUnknown:
		return "This sign-in was not started here, has expired or was already used."
	case reason.SAMLReplayed:
		return "This sign-in was already used."
	case reason.SAMLUnsolicited:
		return "This site accepts only sign-ins it started."
	case reason.SAMLStatusFailure:
		return "The identity provider did not sign you in."
	case reason.SAMLTenantMissing:
		return "Your account names no organization for this site."
	case reason.SAMLNotFound:
		return "There is no sign-in page at this address."
	case reason.SAMLMethodNotAllowed:
		return "This sign-in address is not meant to be opened directly."
	case reason.SAMLBadReturnTo:
		return "The page to return to after sign-in is not on this site."
	case reason.SAMLIDPUnavailable:
		return "The identity provider cannot be reached right now; try again shortly."
	case reason.SAMLStoreUnavailable, reason.SAMLInternal:
		return "Sign-in failed on our side; try again shortly."
	case reason.SAMLTooLarge:
		return "The sign-in response is too large."
	}
	return "The identity provider's answer could not be accepted."
}
