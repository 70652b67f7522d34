package authz

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// MiddlewareOptions configures Middleware. Every field is optional.
type MiddlewareOptions struct {
	// FailMode overrides the Authorizer's fail mode (FailOpen or
	// FailClosed) for every route. An unknown value means FailClosed.
	FailMode string
	// FailModeFor, when set, chooses the fail mode of one request, e.g.
	// closed for /admin and open elsewhere; "" falls back to FailMode,
	// then to the Authorizer's. An unknown value means FailClosed.
	FailModeFor func(*http.Request) string
	// AllowAnonymous lets a request without a bearer token through as the
	// user "anonymous" with reason "token-missing", without asking the
	// decision service (so without a policy check). A token that is
	// present but invalid is still refused.
	AllowAnonymous bool
	// Action, when set and returning a non-empty action such as
	// "orders:read", makes the middleware authorize the request against
	// the policy and answer 403 on a denial. Otherwise it only validates
	// the token.
	Action func(*http.Request) string
	// Resource, when set, names the resource of the action; by default its
	// type is the action's prefix, its tenant the deployment's.
	Resource func(*http.Request) Resource
	// IncludeRequest sends the HTTP request (method, path, host, query,
	// headers) to the policy as input.request, with the headers the
	// sidecar's proxy check gives a policy: without credentials, without
	// the x-svc-* headers the sidecar owns (a client's copy is forged;
	// input.user is the identity) and, unless TrustForwardedFor, without
	// X-Forwarded-For, Forwarded and X-Real-IP, which any client can send.
	IncludeRequest bool
	// TrustForwardedFor lets the policy see X-Forwarded-For, Forwarded and
	// X-Real-IP in input.request.headers (with IncludeRequest), as
	// sidecar.trust_forwarded_for does for the proxy check. Set it only
	// when every path to the application goes through a proxy that
	// overwrites them.
	TrustForwardedFor bool
	// SessionCookie names the sign-in gateways' session cookie
	// (sdk.session.cookie_name, default "svc_session"): a request with no
	// Authorization header is authenticated by the token in it, checked
	// by the decision service exactly as a bearer token. The cookie
	// "__Host-" + SessionCookie, which the gateway sets wherever its
	// cookies are Secure, is read first, then SessionCookie: a cookie
	// tossed by a sibling subdomain cannot displace the prefixed one.
	// Name it unprefixed, as in the configuration. Empty means the
	// Authorizer's own (SessionCookie() of a Client, read from the
	// deployment's configuration; of a local authorizer, its engine's),
	// which is none when the deployment has no sign-in gateway (SAML or
	// OpenID Connect); "-" turns the cookie off. A request with an
	// Authorization header never falls back to the cookie, whatever its
	// scheme.
	SessionCookie string
	// SessionCookiePrefixedOnly reads only "__Host-" + SessionCookie,
	// never the unprefixed cookie: right wherever the gateways' cookies
	// are Secure (their public URLs are not plain http on a loopback
	// host), since an unprefixed session cookie there can only be one a
	// sibling subdomain tossed in for the parent domain, which would sign
	// a browser without a session of its own in as whoever it names. It
	// is also on when the Authorizer says so (SessionCookiePrefixedOnly()
	// of a Client, from the gateways' URLs in the deployment's
	// configuration, or of a local authorizer), whether SessionCookie is
	// named here or taken from it.
	SessionCookiePrefixedOnly bool
	// Realm, when set, is announced in WWW-Authenticate.
	Realm string
	// Logger receives errors that are neither decisions nor outages;
	// default slog.Default().
	Logger *slog.Logger
	// Identity, when set, admits a request on the identity token the
	// sidecar handed it through the proxy (HeaderIdentity) instead of
	// asking the Authorizer, which may then be nil: the proxy's check has
	// decided already. A request without a token, or with one that does
	// not verify, is refused 401; 503 when the verifier has no keys.
	// Action, Resource, AllowAnonymous, the fail modes and the session
	// cookie do not apply. See package authz/identitytoken.
	Identity IdentityVerifier
}

// HeaderIdentity carries the sidecar's signed identity token to the
// upstream of an allowed request.
const HeaderIdentity = "X-Svc-Identity"

// IdentityVerifier verifies the sidecar's identity token of a request
// (MiddlewareOptions.Identity); *identitytoken.Verifier implements it. A
// refused token is an error with a reason code (reason.Of).
type IdentityVerifier interface {
	VerifyIdentity(ctx context.Context, token string) (User, error)
}

// User is the caller of a request that the middleware let through. It is
// stored in the request's context; read it with UserFrom.
type User struct {
	// Subject is the sub claim, or "anonymous" in development mode, on
	// fail-open and for an allowed anonymous request.
	Subject string `json:"subject"`
	// TenantID is the tenant_id claim.
	TenantID string `json:"tenant_id,omitempty"`
	// Claims is the verified claim set; nil in development mode, on
	// fail-open and for an anonymous request. The map is the request's
	// own copy.
	Claims map[string]any `json:"claims"`
	// Reason is how the caller was admitted: "ok" or "policy-allow" for a
	// verified token, "dev-anonymous", "fail-open" or "token-missing".
	Reason reason.Code `json:"reason"`
	// DecisionID identifies the policy decision when the route has an
	// Action.
	DecisionID string `json:"decision_id,omitempty"`
}

type userKey struct{}

// ContextWithUser returns a copy of ctx carrying u, as the middleware
// stores it; handlers' tests use it to fake an authenticated request.
func ContextWithUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// UserFrom returns the user the middleware stored in ctx.
func UserFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(userKey{}).(User)
	return u, ok
}

// DenyBody is the JSON body of every request the middleware refuses, the
// same as the proxy check's (package wire); the middleware leaves
// decision_id out when there was no decision.
type DenyBody = wire.DenyBody

// Middleware protects an http.Handler with bearer-token authentication
// (or the sign-in gateways' session cookie, see
// MiddlewareOptions.SessionCookie) and, when opts.Action is set, policy
// authorization:
//
//	no bearer token or API key   401 token-missing (unless AllowAnonymous)
//	invalid token                401, WWW-Authenticate: Bearer error="invalid_token"
//	invalid API key              401, WWW-Authenticate: ApiKey error="invalid_key"
//	token of another tenant      403 tenant-mismatch (validate-only mode)
//	policy denies                403 with the deny reasons and decision id
//	method override header       400 input-invalid (route with an action)
//	naming another method
//	tenant rate-limited          429 with Retry-After
//	decision service unreachable open: let through as "anonymous", claims nil
//	                             closed: 503
//	engine cannot decide         503 policy-error in both fail modes
//	decision log refuses         503 decision-log-unavailable in both fail modes
//	keys unavailable (IdP down)  503
//
// Denials carry a DenyBody. Admitted requests carry the User in their
// context (UserFrom). The middleware panics when c is nil, unless
// opts.Identity is set.
func Middleware(c Authorizer, opts MiddlewareOptions) func(http.Handler) http.Handler {
	if c == nil && opts.Identity == nil {
		panic("authz: Middleware needs an Authorizer")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	switch opts.SessionCookie {
	case "-":
		opts.SessionCookie = ""
	case "":
		if sc, ok := c.(interface{ SessionCookie() string }); ok {
			opts.SessionCookie = sc.SessionCookie()
		}
	}
	// Behind gateways that prefix every cookie an unprefixed one was
	// tossed in, whoever named the cookie.
	if sc, ok := c.(interface{ SessionCookiePrefixedOnly() bool }); ok && opts.SessionCookie != "" && sc.SessionCookiePrefixedOnly() {
		opts.SessionCookiePrefixedOnly = true
	}
	return func(next http.Handler) http.Handler {
		return &middleware{c: c, opts: opts, next: next}
	}
}

type middleware struct {
	c    Authorizer
	opts MiddlewareOptions
	next http.Handler
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if m.opts.Identity != nil {
		m.serveIdentity(w, r)
		return
	}
	tok := m.token(r)
	if tok == "" {
		if m.opts.AllowAnonymous {
			m.admit(w, r, User{Subject: AnonymousSubject, Reason: reason.TokenMissing})
			return
		}
		m.challenge(w, "")
		m.refuse(w, http.StatusUnauthorized, DenyBody{Reason: string(reason.TokenMissing)})
		return
	}
	action := ""
	if m.opts.Action != nil {
		action = m.opts.Action(r)
	}
	if action == "" {
		td, err := m.c.ValidateToken(r.Context(), tok)
		switch {
		case err != nil:
			m.failed(w, r, err)
		case td.Reason == reason.FailOpen:
			m.unavailable(w, r, reason.Unavailable)
		case !td.Allowed:
			m.denied(w, Decision{Reason: td.Reason})
		default:
			m.admit(w, r, User{Subject: td.Subject, TenantID: td.TenantID, Claims: td.Claims, Reason: td.Reason})
		}
		return
	}
	if methodOverridden(r) {
		// The handler may serve another method than the one judged.
		m.refuse(w, http.StatusBadRequest, DenyBody{Reason: string(reason.InputInvalid)})
		return
	}
	req := AuthorizeRequest{Token: tok, Action: action}
	if m.opts.Resource != nil {
		req.Resource = m.opts.Resource(r)
	}
	if m.opts.IncludeRequest {
		info := requestInfoOf(r, m.opts.TrustForwardedFor)
		if _, err := requestOf(info); err != nil {
			// The request itself is out of bounds (e.g. a huge path).
			m.refuse(w, http.StatusBadRequest, DenyBody{Reason: string(reason.InputInvalid)})
			return
		}
		req.Request = info
	}
	d, err := m.c.Authorize(r.Context(), req)
	switch {
	case err != nil:
		m.failed(w, r, err)
	case d.Reason == reason.FailOpen:
		m.unavailable(w, r, reason.Unavailable)
	case !d.Allowed:
		m.denied(w, d)
	default:
		m.admit(w, r, User{Subject: d.Subject, TenantID: d.TenantID, Claims: d.Claims, Reason: d.Reason, DecisionID: d.DecisionID})
	}
}

// serveIdentity admits r on its identity token alone.
func (m *middleware) serveIdentity(w http.ResponseWriter, r *http.Request) {
	u, err := m.opts.Identity.VerifyIdentity(r.Context(), r.Header.Get(HeaderIdentity))
	if err == nil {
		m.admit(w, r, u)
		return
	}
	rc := reason.Of(err, reason.SignatureInvalid)
	if rc == reason.JWKSUnavailable {
		m.refuse(w, http.StatusServiceUnavailable, DenyBody{Reason: string(rc)})
		return
	}
	if rc == reason.TokenMissing {
		rc = ""
	}
	m.challenge(w, rc)
	m.refuse(w, http.StatusUnauthorized, DenyBody{Reason: string(reason.Of(err, reason.SignatureInvalid))})
}

// token returns the bearer token of r, else its API key
// ("Authorization: ApiKey <key>", or X-Api-Key without an Authorization
// header), else, when r has no Authorization header at all, the session
// cookie's: "__Host-" + SessionCookie first,
// then SessionCookie (wire.SessionCookie).
func (m *middleware) token(r *http.Request) string {
	if tok := BearerToken(r); tok != "" {
		return tok
	}
	_, hasAuth := r.Header["Authorization"]
	if key := wire.APIKeyFromHeaders(r.Header.Get("Authorization"), hasAuth, r.Header.Get("X-Api-Key")); key != "" {
		// The decision service takes a key in the token field: it starts
		// svck_, which no token does.
		return key
	}
	if hasAuth || m.opts.SessionCookie == "" {
		return ""
	}
	v, _ := wire.SessionCookieFrom(r, m.opts.SessionCookie, m.opts.SessionCookiePrefixedOnly)
	return strings.TrimSpace(v)
}

func (m *middleware) admit(w http.ResponseWriter, r *http.Request, u User) {
	m.next.ServeHTTP(w, r.WithContext(ContextWithUser(r.Context(), u)))
}

// failed handles an error of the Authorizer: an outage goes by fail mode,
// anything else (a malformed action or resource from the route's own
// configuration) is the server's fault, 500.
func (m *middleware) failed(w http.ResponseWriter, r *http.Request, err error) {
	var ue *UnavailableError
	if errors.As(err, &ue) {
		if !unreachable(ue.Reason) {
			// The decision service answered: it could not or would not
			// decide (policy-error, or decision-log-unavailable from a
			// decision log that refuses to decide unlogged). Fail open is
			// for a service that cannot be reached, never this.
			m.refuse(w, http.StatusServiceUnavailable, DenyBody{Reason: string(ue.Reason)})
			return
		}
		m.unavailable(w, r, ue.Reason)
		return
	}
	if errors.Is(err, ErrUnavailable) {
		m.unavailable(w, r, reason.Unavailable)
		return
	}
	if r.Context().Err() != nil {
		// The caller went away; nobody reads the answer.
		m.refuse(w, http.StatusServiceUnavailable, DenyBody{Reason: string(reason.Unavailable)})
		return
	}
	rc := reason.Of(err, reason.PolicyError)
	m.opts.Logger.ErrorContext(r.Context(), "authorization failed", "reason", rc, "err", err,
		"method", r.Method, "path", r.URL.Path)
	m.refuse(w, http.StatusInternalServerError, DenyBody{Reason: string(rc)})
}

// unreachable reports whether an *UnavailableError's reason says that the
// decision service could not be reached in time (reason.Unavailable, as a
// Client sets it for a refused connection or a timeout), the one case the
// fail mode applies to. Any other code is the service's own answer.
func unreachable(rc reason.Code) bool {
	return rc == "" || rc == reason.Unavailable || rc == reason.FailOpen
}

// unavailable applies the request's fail mode when no decision could be
// obtained.
func (m *middleware) unavailable(w http.ResponseWriter, r *http.Request, rc reason.Code) {
	if m.failModeFor(r) == FailOpen {
		m.admit(w, r, User{Subject: AnonymousSubject, Reason: reason.FailOpen})
		return
	}
	if rc == "" || rc == reason.FailOpen {
		rc = reason.Unavailable
	}
	m.refuse(w, http.StatusServiceUnavailable, DenyBody{Reason: string(rc)})
}

func (m *middleware) failModeFor(r *http.Request) string {
	mode := ""
	if m.opts.FailModeFor != nil {
		mode = m.opts.FailModeFor(r)
	}
	if mode == "" {
		mode = m.opts.FailMode
	}
	if mode == "" {
		mode = m.c.FailMode()
	}
	if mode == FailOpen {
		return FailOpen
	}
	return FailClosed
}

// denied answers a decision that refused the request.
func (m *middleware) denied(w http.ResponseWriter, d Decision) {
	body := DenyBody{Reason: string(d.Reason), DenyReasons: d.DenyReasons, DecisionID: d.DecisionID}
	switch {
	case d.Reason == reason.PolicyDeny, d.Reason == reason.TenantMismatch:
		// A token of a tenant this deployment does not serve is authentic:
		// a new token would not help, so 403 rather than a challenge.
		m.refuse(w, http.StatusForbidden, body)
	case d.Reason == reason.RateLimited:
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Max(1, math.Ceil(d.RetryAfter.Seconds())))))
		m.refuse(w, http.StatusTooManyRequests, body)
	case reason.Unjudged(d.Reason), d.Reason == reason.PolicyError, d.Reason == reason.Unavailable:
		// The token could not be checked, which says nothing about it:
		// never admit it, and do not make the client drop it either.
		m.refuse(w, http.StatusServiceUnavailable, body)
	case d.Reason == reason.TokenMissing:
		m.challenge(w, "")
		m.refuse(w, http.StatusUnauthorized, body)
	case tokenFailures[d.Reason]:
		m.challenge(w, d.Reason)
		m.refuse(w, http.StatusUnauthorized, body)
	default:
		m.refuse(w, http.StatusForbidden, body)
	}
}

// tokenFailures are the reasons for which a credential itself was
// refused (reason.TokenFailures, reason.APIKeyFailures).
var tokenFailures = func() map[reason.Code]bool {
	m := map[reason.Code]bool{}
	for _, c := range append(append([]reason.Code(nil), reason.TokenFailures...), reason.APIKeyFailures...) {
		m[c] = true
	}
	return m
}()

// challenge sets WWW-Authenticate (RFC 6750 §3): no error attribute when
// the request had no token, invalid_token with the reason code otherwise;
// a refused API key gets the ApiKey scheme and invalid_key.
func (m *middleware) challenge(w http.ResponseWriter, rc reason.Code) {
	var params []string
	if m.opts.Realm != "" {
		params = append(params, "realm="+strconv.Quote(m.opts.Realm))
	}
	if rc != "" {
		params = append(params, `error="invalid_token"`, "error_description="+strconv.Quote(string(rc)))
	}
	v := "Bearer"
	if reason.IsAPIKey(rc) {
		// A refused API key is challenged in its own scheme.
		v, params[len(params)-2] = "ApiKey", `error="invalid_key"`
	}
	if len(params) > 0 {
		v += " " + strings.Join(params, ", ")
	}
	w.Header().Set("WWW-Authenticate", v)
}

func (m *middleware) refuse(w http.ResponseWriter, code int, body DenyBody) {
	body.OmitEmptyDecisionID = true
	wire.WriteJSON(w, code, wire.Compact, body)
}

// requestInfoOf describes r for input.request: the first value of each
// query parameter, headers joined with ", ", credentials left out, and
// the headers the proxy check never gives a policy (policyHeader). Entries
// a policy could not be given (not UTF-8, oversized) are left out, and at
// most maxRequestMap of each kept, sorted by name so the cut is stable.
func requestInfoOf(r *http.Request, trustForwardedFor bool) *RequestInfo {
	info := &RequestInfo{Method: r.Method, Path: r.URL.Path, Host: r.Host}
	q := make(map[string][]string)
	for k, v := range r.URL.Query() {
		if len(v) > 0 && usableEntry(k, v[0]) {
			q[k] = v[:1]
		}
	}
	if len(q) > 0 {
		info.Query = make(map[string]string, min(len(q), maxRequestMap))
		for _, k := range firstKeys(q, maxRequestMap) {
			info.Query[k] = q[k][0]
		}
	}
	hs := make(map[string][]string, len(r.Header))
	for k, v := range r.Header {
		name := strings.ToLower(k)
		if policyHeader(name, trustForwardedFor) && validHeaderName(name) && usableEntry(name, strings.Join(v, ", ")) {
			hs[name] = v
		}
	}
	if len(hs) > 0 {
		info.Headers = make(map[string]string, min(len(hs), maxRequestMap))
		for _, k := range firstKeys(hs, maxRequestMap) {
			info.Headers[k] = strings.Join(hs[k], ", ")
		}
	}
	return info
}

// methodOverrideHeaders make Rails, Express (method-override), Spring,
// gorilla's HTTPMethodOverrideHandler and others serve a request as the
// method they name.
var methodOverrideHeaders = [...]string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// methodOverridden reports whether a method override header of r names
// another method than r's own, which the sidecar's proxy check refuses
// too: a handler honoring it would serve "GET /orders/1" with
// "X-HTTP-Method-Override: DELETE" as the DELETE while the policy judged
// the read. An override applied before the middleware (r.Method already
// the one named) passes.
func methodOverridden(r *http.Request) bool {
	for _, h := range methodOverrideHeaders {
		for _, v := range r.Header.Values(h) {
			if !strings.EqualFold(strings.TrimSpace(v), r.Method) {
				return true
			}
		}
	}
	return false
}

// forwardingHeaders name the client's address: any client can send them.
var forwardingHeaders = map[string]bool{"x-forwarded-for": true, "forwarded": true, "x-real-ip": true}

// policyHeader reports whether the header name (lower-case) of a request
// reaches the policy, by the rule of the sidecar's proxy check: never a
// credential, never one of the x-svc-* headers the sidecar sets for the
// upstream (in a request to the application a client sent it), and a
// forwarding header only when trusted.
func policyHeader(name string, trustForwardedFor bool) bool {
	return !droppedHeaders[name] && !strings.HasPrefix(name, "x-svc-") &&
		(trustForwardedFor || !forwardingHeaders[name])
}

func usableEntry(k, v string) bool {
	return len(k) <= maxRequestValue && len(v) <= maxRequestValue && utf8.ValidString(k) && utf8.ValidString(v)
}

func firstKeys(m map[string][]string, n int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) > n {
		keys = keys[:n]
	}
	return keys
}
