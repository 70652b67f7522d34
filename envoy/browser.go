package envoy

import (
	"net/http"
	"net/url"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/refusalpage"
	"github.com/svc-dev/svc/reason"
)

// HeaderLogin carries, on a 401 answered to nginx auth_request, the login
// URL a browser is to be sent to: auth_request passes on only 401 and 403,
// never a 302, so the shipped nginx.conf reads it with auth_request_set and
// its @svc_denied location answers 302 to it.
const HeaderLogin = "X-Svc-Login"

// headerContentType tells nginx the media type of X-Svc-Body (JSON, or
// the HTML page for a browser); @svc_denied answers with it.
const headerContentType = "X-Svc-Content-Type"

// HeaderSetCookie carries, in an nginx auth_request answer, the
// Set-Cookie of a renewed session (or of one that ended): the shipped
// nginx.conf reads it with auth_request_set and adds it to the response.
const HeaderSetCookie = "X-Svc-Set-Cookie"

// signIn is where browsers sign in: the OpenID Connect login when
// [sdk.oidc] is configured (its page offers SAML too when both are),
// else the SAML gateway's login.
type signIn struct {
	// loginPath is <path_prefix>/login; "" without browser sign-in.
	loginPath string
	// redirect is sdk.session.browser_redirect.
	redirect bool
	// tenants: the login offers each tenant its own providers
	// ([[sdk.oidc.providers]] with a tenant), so the login URL names the
	// request's tenant.
	tenants bool
}

func newSignIn(cfg config.Config) signIn {
	var prefix string
	tenants := false
	switch {
	case cfg.SDK.OIDC != nil:
		prefix = cfg.SDK.OIDC.PathPrefix
		if prefix == "" {
			prefix = config.DefaultOIDCPathPrefix
		}
		for _, p := range cfg.SDK.OIDC.All() {
			tenants = tenants || p.Tenant != ""
		}
	case cfg.SDK.SAML != nil:
		prefix = cfg.SDK.SAML.PathPrefix
		if prefix == "" {
			prefix = config.DefaultSAMLPathPrefix
		}
	default:
		return signIn{}
	}
	redirect := cfg.SDK.Session.RedirectsBrowsers()
	if cfg.SDK.SAML != nil {
		redirect = cfg.SDK.SAML.RedirectsBrowsers() // its older name, which code may set after defaults
	}
	return signIn{loginPath: prefix + "/login", redirect: redirect, tenants: tenants}
}

// present adapts a denial to who asked. An API client (no text/html
// preferred in Accept: application/json, "*/*" alone, no Accept at all; or
// any request with an Authorization or X-Api-Key header, which a browser
// does not send on its own) gets it unchanged, JSON byte for byte. A browser gets the
// HTML page; and when its token was refused (401: missing, expired,
// malformed, unknown key...; not a policy denial, not jwks-unavailable),
// the request is a GET or HEAD and browser_redirect is on, it is sent to
// sign in, to come back to the page it asked for, at the sign-in of
// tenant (the request's, "" when unknown).
func (s *Server) present(v verdict, pr proxyRequest, tenant string) verdict {
	if v.allow || !refusalpage.PrefersHTML(pr.headers["accept"]) {
		return v
	}
	if _, bearer := pr.headers["authorization"]; bearer {
		return v
	}
	if _, key := pr.headers["x-api-key"]; key {
		return v
	}
	v.html = true
	if s.signIn.loginPath == "" || v.status != http.StatusUnauthorized {
		return v
	}
	readOnly := pr.method == http.MethodGet || pr.method == http.MethodHead
	v.login = s.signIn.loginURL(pr.target, readOnly, tenant)
	v.redirect = s.signIn.redirect && readOnly
	return v
}

// loginURL is the login path with return_to naming target (the original
// path and query) when it is a same-origin path and the request can be
// repeated as a GET (otherwise the gateway's default_return_to applies),
// and tenant naming the request's tenant when providers are per tenant:
// the login then offers that tenant's providers only, and goes straight
// to the provider when it has one. The tenant only narrows the choice: a
// session's tenant is always its provider's.
func (si signIn) loginURL(target string, repeatable bool, tenant string) string {
	q := url.Values{}
	if t, ok := config.ReturnToPath(target); repeatable && ok && t != "" {
		q.Set("return_to", target)
	}
	if si.tenants && tenant != "" {
		q.Set("tenant", tenant)
	}
	if len(q) == 0 {
		return si.loginPath
	}
	return si.loginPath + "?" + q.Encode()
}

// page is the HTML page of a denial.
func (v *verdict) page() refusalpage.Page {
	p := refusalpage.Page{
		Status: v.status, Reason: string(v.reason), DecisionID: v.decisionID,
		Message: denialMessage(v), SignInURL: v.login, Why: v.body.DenyReasons,
	}
	if v.reason == reason.TokenMissing {
		p.SignInText = "Sign in"
	}
	return p
}

func denialMessage(v *verdict) string {
	switch v.status {
	case http.StatusUnauthorized:
		switch v.reason {
		case reason.TokenMissing:
			return "You need to sign in to see this page."
		case reason.TokenExpired:
			return "Your session has expired; sign in again to continue."
		}
		return "Your session is not valid here; sign in again to continue."
	case http.StatusForbidden:
		return "You do not have access to this page."
	case http.StatusTooManyRequests:
		if v.retryAfter == "1" {
			return "Too many requests; try again in a second."
		}
		return "Too many requests; try again in " + v.retryAfter + " seconds."
	case http.StatusBadRequest:
		return "This request could not be read."
	case http.StatusServiceUnavailable:
		return "Sign-in cannot be checked right now; try again shortly."
	}
	return "This request could not be checked; try again shortly."
}

// answer is the body of a denial and its media type: the JSON DenyBody,
// or the HTML page for a browser.
func (v *verdict) answer() (contentType string, body []byte) {
	if v.html {
		return refusalpage.ContentType, refusalpage.Render(v.page())
	}
	return "application/json", v.bodyJSON()
}

// pageHeaders are the headers of an HTML denial besides Content-Type.
var pageHeaders = [][2]string{
	{"content-security-policy", refusalpage.ContentSecurityPolicy},
	{"x-content-type-options", "nosniff"},
	{"cache-control", "no-store"},
}
