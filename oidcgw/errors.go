package oidcgw

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/svc-dev/svc/internal/refusalpage"
	"github.com/svc-dev/svc/reason"
)

// A refusal is a *reason.Error: a stable code and a message safe to
// show the client (never a token, a code or a secret), wrapping the
// cause that is logged.

func refuse(c reason.Code, format string, args ...any) *reason.Error {
	return reason.New(c, format, args...)
}

// CodeOf returns the code of err, OIDCInternal for an error that carries
// none.
func CodeOf(err error) reason.Code { return reason.Of(err, reason.OIDCInternal) }

// status is the HTTP status of a refusal with code c.
func status(c reason.Code) int {
	switch c {
	case reason.OIDCBadReturnTo, reason.OIDCUnknownProvider, reason.OIDCLogoutTokenInvalid:
		return http.StatusBadRequest
	case reason.OIDCTenantMissing:
		return http.StatusForbidden
	case reason.OIDCNotFound:
		return http.StatusNotFound
	case reason.OIDCProviderUnavailable, reason.OIDCStoreUnavailable:
		return http.StatusServiceUnavailable
	case reason.OIDCInternal:
		return http.StatusInternalServerError
	}
	return http.StatusUnauthorized
}

// signInHelps reports whether signing in again can end a refusal.
func signInHelps(c reason.Code) bool {
	switch c {
	case reason.OIDCStateNotBound, reason.OIDCStateUnknown, reason.OIDCProviderError, reason.OIDCCodeRefused, reason.OIDCIssuerMismatch,
		reason.OIDCNonceMismatch, reason.OIDCBadReturnTo, reason.OIDCProviderUnavailable, reason.OIDCStoreUnavailable,
		reason.OIDCRefreshFailed, reason.OIDCSessionRevoked, reason.OIDCInternal:
		return true
	}
	return false
}

// refusalMessage says what happened, in one sentence for a person.
func refusalMessage(c reason.Code) string {
	switch c {
	case reason.OIDCStateNotBound:
		return "This sign-in was not started in this browser."
	case reason.OIDCStateUnknown:
		return "This sign-in has expired or was already used."
	case reason.OIDCProviderError:
		return "The identity provider did not sign you in."
	case reason.OIDCTenantMissing:
		return "Your account names no organization for this site."
	case reason.OIDCBadReturnTo:
		return "The page to return to after sign-in is not on this site."
	case reason.OIDCProviderUnavailable:
		return "The identity provider cannot be reached right now; try again shortly."
	case reason.OIDCStoreUnavailable, reason.OIDCInternal:
		return "Sign-in failed on our side; try again shortly."
	case reason.OIDCNotFound, reason.OIDCUnknownProvider:
		return "There is no sign-in page at this address."
	}
	return "The identity provider's answer could not be accepted."
}

// writeRefusal answers err: the HTML page for a browser (with a link to
// sign in again where that helps), else the JSON refusal
// {"error": code, "message": ...}.
func (g *Gateway) writeRefusal(w http.ResponseWriter, r *http.Request, err error) {
	var e *reason.Error
	if !errors.As(err, &e) {
		e = reason.Wrap(reason.OIDCInternal, err, "sign-in failed")
	}
	st := status(e.Code)
	w.Header().Set("Cache-Control", "no-store")
	if refusalpage.PrefersHTML(r.Header.Get("Accept")) {
		p := refusalpage.Page{Status: st, Message: refusalMessage(e.Code), Reason: string(e.Code)}
		if signInHelps(e.Code) {
			p.SignInURL = g.loginURL("")
		}
		refusalpage.Write(w, p)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st)
	_ = json.NewEncoder(w).Encode(struct {
		Error   reason.Code `json:"error"`
		Message string      `json:"message"`
	}{e.Code, e.Msg})
}
