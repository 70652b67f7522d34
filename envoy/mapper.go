package envoy

import (
	"strings"
	"unsafe"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/clientcert"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/reqpath"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// Context extension keys a route can set in Envoy's ext_authz per-route
// configuration (check_settings.context_extensions). They win over the
// route table and the default mapping, field by field.
const (
	// ExtAction sets input.action ("orders:read").
	ExtAction = "svc.action"
	// ExtResource sets input.resource.type, and the action's prefix when
	// ExtAction is absent.
	ExtResource = "svc.resource"
	// ExtResourceID sets input.resource.id.
	ExtResourceID = "svc.resource_id"
	// ExtTenant sets input.resource.tenant.
	ExtTenant = "svc.tenant"
)

// RootResource is the resource of a request for "/", which has no first
// path segment to name one.
const RootResource = "root"

// FallbackVerb is the verb of a method that is not a plain word (the
// default mapping lower-cases any other method: OPTIONS → "options").
const FallbackVerb = "access"

// Mapper translates proxied requests into policy input. It is built once
// from configuration and is safe for concurrent use.
type Mapper struct {
	tenantID string
	routes   []route
	// trustForwardedFor passes X-Forwarded-For, Forwarded and X-Real-IP to
	// the policy, and takes an HTTP check's source address from
	// X-Forwarded-For (sidecar.trust_forwarded_for).
	trustForwardedFor bool
	// sessionCookie names the cookie that carries a token issued by the
	// SAML gateway; read only when there is no Authorization header.
	// hostSessionCookie is the same name under wire.HostCookiePrefix,
	// built once here rather than on every check.
	sessionCookie, hostSessionCookie string
	// prefixedOnly: the unprefixed sessionCookie is not read
	// (WithSessionCookie).
	prefixedOnly bool
	// canon holds the case sensitivity of the route table
	// (envoy.routes_case_sensitive: literal segments match
	// case-sensitively and the default resource keeps its case) and the
	// format suffixes it cuts (envoy.format_suffixes).
	canon reqpath.Canon
}

// WithCaseSensitiveRoutes makes the route table match literal segments
// case-sensitively (envoy.routes_case_sensitive); a request that would
// match a route in another letter case is then refused with
// reason.PathInvalid instead of falling to the default mapping. The
// default folds case. It returns m.
func (m *Mapper) WithCaseSensitiveRoutes(on bool) *Mapper {
	m.canon.CaseSensitive = on
	return m
}

// WithFormatSuffixes sets the format suffixes the mapping cuts off a
// path's last segment (envoy.format_suffixes; default
// reqpath.DefaultFormats): a route's capture of that segment and the
// default mapping's resource and id leave a listed suffix out, in any
// letter case ("/orders/42.json" is order "42"). It returns m.
func (m *Mapper) WithFormatSuffixes(formats []string) *Mapper {
	m.canon.Formats = formats
	return m
}

// WithSessionCookie makes the mapper take the token from the session
// cookie when a request carries no Authorization header (browsers signed
// in through the SAML gateway): "__Host-" + name when the request has it,
// else name (wire.SessionCookie's rule). With prefixedOnly, for a
// deployment whose gateways set only Secure, prefixed cookies, name alone
// is never read: a sibling subdomain can toss an unprefixed cookie for
// the parent domain, and a browser without a session of its own would
// then be signed in as whoever the tossed session names. It returns m.
func (m *Mapper) WithSessionCookie(name string, prefixedOnly bool) *Mapper {
	m.sessionCookie, m.hostSessionCookie, m.prefixedOnly = name, "", prefixedOnly
	if name != "" {
		m.hostSessionCookie = wire.HostCookiePrefix + name
	}
	return m
}

// NewMapper compiles the route table. tenantID is the deployment's tenant,
// the default of input.resource.tenant. Routes are tried in order; the first
// whose methods and path template match wins.
func NewMapper(tenantID string, routes []config.Route) (*Mapper, error) {
	m := &Mapper{tenantID: tenantID, routes: make([]route, 0, len(routes)), canon: reqpath.Canon{Formats: reqpath.DefaultFormats}}
	for i, r := range routes {
		rt, err := compileRoute(i, r)
		if err != nil {
			return nil, err
		}
		m.routes = append(m.routes, rt)
	}
	return m, nil
}

// proxyRequest is what every proxy convention tells about the request to
// authorize, before mapping.
type proxyRequest struct {
	method string
	target string // path and query as sent, not decoded
	host   string
	// headers have lower-case keys and still hold authorization.
	headers map[string]string
	// ext are Envoy context extensions; nil for HTTP check requests.
	ext map[string]string
	// sourceIP is the address of the peer: the downstream client Envoy
	// reports in a CheckRequest, or the proxy that sent an HTTP check.
	sourceIP string
	// viaProxy is true for HTTP checks, whose peer is the proxy.
	viaProxy bool
	// renews: the proxy can hand a renewed session cookie to the client
	// with an allowed answer (Server.SetSessionRenewal).
	renews bool
	// clientCert is what the proxy vouched for about the client's
	// certificate: Envoy's source principal and certificate, or the
	// X-Forwarded-Client-Cert header of an HTTP check from a trusted
	// proxy.
	clientCert clientcert.Presented
}

// FromCheckRequest translates an ext_authz CheckRequest into the
// credential and the policy input to authorize.
//
// The credential is an API key of an "Authorization: ApiKey" header, or
// of an X-Api-Key header when there is no Authorization header; else the
// token of an "Authorization: Bearer" header (schemes are matched
// case-insensitively); it is empty when there is none, which the engine
// answers with reason token-missing. The source peer's principal and
// certificate (attributes.source, set by Envoy when its listener verified
// a client certificate) go along as Credential.ClientCert, which the
// engine judges only without another credential. input.action and
// input.resource come, field by field, from the context extensions
// (ExtAction, ExtResource, ExtResourceID, ExtTenant), then from the first
// matching route, then from the default mapping:
//
//   - resource: the route's Resource or its {resource} capture, else the
//     prefix of an action given without a resource ("reports:export"),
//     else the first path segment (RootResource for "/"); a capture or
//     segment is lower-cased unless routes are case-sensitive, as the
//     route table matches it ("/Orders/1" is "orders");
//   - id: the route's {id} capture; without a route, the second segment of
//     a two-segment path ("/orders/42"), in the request's case;
//   - tenant: the route's {tenant} capture, else the deployment's tenant;
//   - action: the route's Action, else "<resource>:<verb>" where GET and
//     HEAD read, POST creates, PUT and PATCH update, DELETE deletes, another
//     method made of letters is lower-cased and any other is FallbackVerb.
//
// Route templates match their literal segments in any letter case, and
// the last segment with or without one format suffix (".json"), as
// Express, ASP.NET Core and Rails route; a known format suffix
// (WithFormatSuffixes) never ends up in a capture of the last segment or
// in the default resource and id ("/orders/42.json" is order "42"); with WithCaseSensitiveRoutes a
// request that matches a route only in another case is refused (see
// matchRoute). Paths are judged percent-decoded, segment by segment, with
// empty and dot segments resolved, as the upstream will serve them. input.request
// carries the method, that normalized path, its canonical form
// (canonical_path and format, see reqpath.Canon), the host, the query (a key
// given several times keeps its values joined with ",") and the headers
// less authorization, cookie, proxy-authorization, x-api-key,
// x-forwarded-client-cert, HTTP/2 pseudo-headers and x-svc-* headers.
//
// A request without HTTP attributes, method or path yields an error
// carrying reason.InputInvalid; one whose path has no single meaning
// (see cleanPath) an error carrying reason.PathInvalid.
func (m *Mapper) FromCheckRequest(req *authv3.CheckRequest) (cred engine.Credential, in engine.Input, err error) {
	pr, err := proxyRequestFromCheck(req)
	if err != nil {
		return engine.Credential{}, engine.Input{}, err
	}
	return m.mapRequest(pr)
}

func proxyRequestFromCheck(req *authv3.CheckRequest) (proxyRequest, error) {
	h := req.GetAttributes().GetRequest().GetHttp()
	if h == nil {
		return proxyRequest{}, reason.New(reason.InputInvalid, "check request carries no http attributes")
	}
	pr := proxyRequest{
		method:  h.GetMethod(),
		target:  h.GetPath(),
		host:    h.GetHost(),
		headers: h.GetHeaders(),
		ext:     req.GetAttributes().GetContextExtensions(),
		// Envoy adds response_headers_to_add of an allow to the response.
		renews: true,
		// Envoy's own view of the downstream peer (which honours its
		// use_remote_address and xff_num_trusted_hops), never a header.
		sourceIP: req.GetAttributes().GetSource().GetAddress().GetSocketAddress().GetAddress(),
		// Set by Envoy only when its listener verified the client's
		// certificate; the caller of Check is the proxy.
		clientCert: clientcert.Presented{
			Principal:   req.GetAttributes().GetSource().GetPrincipal(),
			Certificate: req.GetAttributes().GetSource().GetCertificate(),
		},
	}
	if hasUpper(pr.headers) {
		// Envoy always sends lower-case keys; other clients may not.
		lower := make(map[string]string, len(pr.headers))
		for k, v := range pr.headers {
			lk := strings.ToLower(k)
			if prev, ok := lower[lk]; ok {
				v = prev + "," + v
			}
			lower[lk] = v
		}
		pr.headers = lower
	}
	if len(pr.headers) == 0 && h.GetHeaderMap() != nil {
		// encode_raw_headers: repeated entries, raw bytes, keys as sent.
		raw := h.GetHeaderMap().GetHeaders()
		pr.headers = make(map[string]string, len(raw))
		for _, hv := range raw {
			k := strings.ToLower(hv.GetKey())
			v := hv.GetValue()
			if len(hv.GetRawValue()) > 0 {
				v = string(hv.GetRawValue())
			}
			if prev, ok := pr.headers[k]; ok {
				v = prev + "," + v
			}
			pr.headers[k] = v
		}
	}
	if pr.method == "" {
		pr.method = pr.headers[":method"]
	}
	if pr.target == "" {
		pr.target = pr.headers[":path"]
	}
	if pr.host == "" {
		pr.host = pr.headers[":authority"]
	}
	return pr, nil
}

func hasUpper(h map[string]string) bool {
	for k := range h {
		for i := 0; i < len(k); i++ {
			if 'A' <= k[i] && k[i] <= 'Z' {
				return true
			}
		}
	}
	return false
}

// mapRequest is the one mapping shared by ext_authz and HTTP check mode.
func (m *Mapper) mapRequest(pr proxyRequest) (engine.Credential, engine.Input, error) {
	return m.mapRequestInto(pr, new(mappedRequest), false)
}

// mapRequestInto is mapRequest, building input.request and what it needs
// in blk, which the input then shares. With deferred set, input.request's
// headers and query are left for blk.CompleteRequest to fill in.
func (m *Mapper) mapRequestInto(pr proxyRequest, blk *mappedRequest, deferred bool) (engine.Credential, engine.Input, error) {
	if pr.method == "" {
		return engine.Credential{}, engine.Input{}, reason.New(reason.InputInvalid, "request method is missing")
	}
	if pr.target == "" {
		return engine.Credential{}, engine.Input{}, reason.New(reason.InputInvalid, "request path is missing")
	}
	segs, path, err := cleanPathInto(pr.target, blk.segs[:0])
	if err != nil {
		return engine.Credential{}, engine.Input{}, err
	}
	method := strings.ToUpper(pr.method)
	if err := checkMethodOverride(pr.headers, method); err != nil {
		return engine.Credential{}, engine.Input{}, err
	}
	verb := verbOf(method)

	v := m.view(segs)
	c, rt, err := m.matchRoute(method, v)
	if err != nil {
		return engine.Credential{}, engine.Input{}, err
	}
	if v.known {
		// The default mapping reads the segments the route table
		// prefers: without the known format.
		segs = v.stripped
	}

	// Each field: context extension, then route, then default.
	action := pr.ext[ExtAction]
	if action == "" && rt != nil {
		action = rt.action
	}
	resource := pr.ext[ExtResource]
	if resource == "" && rt != nil {
		resource = rt.resource
		if resource == "" {
			resource = m.fold(c.resource)
		}
	}
	if resource == "" {
		// An action given without a resource names it: "reports:export".
		if prefix, _, ok := strings.Cut(action, ":"); ok {
			resource = prefix
		}
	}
	if resource == "" {
		resource = m.fold(defaultResource(segs))
	}
	id := pr.ext[ExtResourceID]
	if id == "" {
		if rt != nil {
			id = c.id
		} else if len(segs) == 2 {
			id = segs[1]
		}
	}
	tenant := pr.ext[ExtTenant]
	if tenant == "" {
		tenant = c.tenant
	}
	if tenant == "" {
		tenant = m.tenantID
	}
	if action == "" {
		action = blk.join(resource, verb)
	}

	// Computed here once, from the segments just cleaned: the engine
	// takes them as they are (engine.Request.Canonical), and they show
	// in the mapped input (core trace, goldens).
	canonical, format := m.canon.Segments(v.segs, path)
	blk.req = policy.Request{
		Method:        method,
		Path:          path,
		Host:          pr.host,
		SourceIP:      m.sourceIP(pr),
		CanonicalPath: canonical,
		Format:        format,
	}
	blk.headers, blk.target, blk.trustForwardedFor, blk.pending = pr.headers, pr.target, m.trustForwardedFor, true
	if !deferred {
		blk.CompleteRequest(&blk.req)
	}
	in := engine.Input{
		Action:   action,
		Resource: policy.Resource{Type: resource, ID: id, Tenant: tenant},
		Request:  &blk.req,
	}
	cred := m.credential(pr.headers)
	cred.ClientCert = pr.clientCert
	return cred, in, nil
}

// credential is what headers present to prove who the caller is: an API
// key ("Authorization: ApiKey <key>", or X-Api-Key without any
// Authorization header), else the bearer token of Authorization, else,
// without an Authorization header, the gateway's session cookie.
func (m *Mapper) credential(h map[string]string) engine.Credential {
	auth, hasAuth := h["authorization"]
	if key := wire.APIKeyFromHeaders(auth, hasAuth, h["x-api-key"]); key != "" {
		return engine.APIKey(key)
	}
	tok := bearerToken(auth)
	if tok == "" && m.sessionCookie != "" && !hasAuth {
		plain := m.sessionCookie
		if m.prefixedOnly {
			plain = ""
		}
		tok = cookieValue(h["cookie"], m.hostSessionCookie, plain)
	}
	return engine.BearerToken(tok)
}

// mappedRequest holds input.request, the path's segments (most paths have
// few enough to fit) and the default action's text, in one allocation.
type mappedRequest struct {
	req    policy.Request
	segs   [8]string
	action [32]byte

	// What CompleteRequest builds req.Headers and req.Query from, until
	// it has (pending false).
	headers           map[string]string
	target            string
	trustForwardedFor bool
	pending           bool
}

// CompleteRequest sets the request's headers and query (policyHeaders,
// parseQuery) the first time it is called, and does nothing after:
// the engine calls it only when something can read them
// (engine.Request.Completer).
// r is the request b holds.
func (b *mappedRequest) CompleteRequest(r *policy.Request) {
	if !b.pending || r != &b.req {
		return
	}
	b.pending = false
	r.Query = parseQuery(b.target)
	r.Headers = policyHeaders(b.headers, b.trustForwardedFor)
}

// SourceHeaders, KeepHeader and SourceQuery are the request's headers
// and query as CompleteRequest sets them, for the decision log's record
// (engine.RequestSource), read from the proxy's headers and target.
func (b *mappedRequest) SourceHeaders() map[string]string { return b.headers }

// KeepHeader says whether CompleteRequest keeps header k.
func (b *mappedRequest) KeepHeader(k string) bool { return keepHeader(k, b.trustForwardedFor) }

// SourceQuery is the query CompleteRequest sets.
func (b *mappedRequest) SourceQuery() map[string]string { return parseQuery(b.target) }

// join returns resource + ":" + verb, written into b.action when it fits.
// The string points into b, which it keeps alive; nothing writes there
// again.
func (b *mappedRequest) join(resource, verb string) string {
	n := len(resource) + 1 + len(verb)
	if n > len(b.action) {
		return resource + ":" + verb
	}
	copy(b.action[copy(b.action[:], resource):], ":")
	copy(b.action[len(resource)+1:], verb)
	return unsafe.String(&b.action[0], n)
}

// matchRoute finds the first route that matches method and segs; rt is
// nil when none does. Routes fold case unless m.canon.CaseSensitive; then a
// request that only a case-folding match would give a route (a near miss:
// "/api/reports/1/Export" for "/api/reports/{id}/export") is refused with
// reason.PathInvalid. An upstream that routes case-insensitively serves it
// as that route, and the default mapping would judge it as something else
// ("api:create" instead of the route's "reports:export").
func (m *Mapper) matchRoute(method string, v pathView) (captures, *route, error) {
	fold := !m.canon.CaseSensitive
	for i := range m.routes {
		if c, ok := m.routes[i].match(method, v, fold); ok {
			return c, &m.routes[i], nil
		}
	}
	if fold {
		return captures{}, nil, nil
	}
	for i := range m.routes {
		if _, ok := m.routes[i].match(method, v, true); ok {
			return captures{}, nil, reason.New(reason.PathInvalid,
				"request path matches route %q only in another letter case (envoy.routes_case_sensitive is on)", m.routes[i].template)
		}
	}
	return captures{}, nil, nil
}

// view is segs as the route table tries them (pathView).
func (m *Mapper) view(segs []string) pathView {
	v := pathView{segs: segs, stripped: withoutSuffix(segs)}
	if v.stripped != nil {
		_, _, v.known = m.canon.CutFormat(segs[len(segs)-1])
	}
	return v
}

// fold lower-cases a resource name unless routes are case-sensitive: the
// route table matched it in any case, so "/Orders/1" names the resource
// "orders" that policies and actions spell in lower case.
func (m *Mapper) fold(resource string) string {
	if m.canon.CaseSensitive {
		return resource
	}
	return strings.ToLower(resource)
}

// cookieValue returns the value of the cookie hostName in a Cookie header
// (or several joined with "; " or ","), else that of the cookie name, ""
// when neither is there. The prefixed cookie wins wherever it stands in
// the header: browsers send the cookies of longer paths first, so one
// tossed by a sibling subdomain with Path=/orders comes before it.
func cookieValue(header, hostName, name string) string {
	if header == "" {
		return ""
	}
	var plain string
	found := false
	for part := range strings.FieldsFuncSeq(header, func(r rune) bool { return r == ';' || r == ',' }) {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
		case k == hostName:
			return strings.Trim(v, `"`)
		case k == name && name != "" && !found:
			plain, found = strings.Trim(v, `"`), true
		}
	}
	return plain
}

// sourceIP is input.request.source_ip: the peer address, except that an
// HTTP check, whose peer is the proxy, takes the last X-Forwarded-For entry
// (the one the proxy itself appended) when sidecar.trust_forwarded_for is
// set.
func (m *Mapper) sourceIP(pr proxyRequest) string {
	if pr.viaProxy && m.trustForwardedFor {
		xff := pr.headers["x-forwarded-for"]
		if i := strings.LastIndexByte(xff, ','); i >= 0 {
			xff = xff[i+1:]
		}
		if ip := strings.TrimSpace(xff); ip != "" {
			return ip
		}
	}
	return pr.sourceIP
}

// defaultResource is the first path segment, or RootResource for "/".
func defaultResource(segs []string) string {
	if len(segs) == 0 {
		return RootResource
	}
	return segs[0]
}

// methodOverrideHeaders make Rails, Express (method-override), Spring and
// other frameworks serve a request as the method they name.
var methodOverrideHeaders = [...]string{"x-http-method-override", "x-http-method", "x-method-override"}

// checkMethodOverride refuses (reason.InputInvalid) a request whose method
// override header names a method other than its own: the upstream would
// serve "POST /orders/1" with "X-HTTP-Method-Override: DELETE" as the
// DELETE while the policy judged the create.
func checkMethodOverride(headers map[string]string, method string) error {
	for _, h := range methodOverrideHeaders {
		if v, ok := headers[h]; ok && !strings.EqualFold(strings.TrimSpace(v), method) {
			return reason.New(reason.InputInvalid, "%s names another method than the request's; upstreams would serve that method", h)
		}
	}
	return nil
}

// verbOf maps an upper-case HTTP method to the action's verb: GET and HEAD
// read, POST creates, PUT and PATCH update, DELETE deletes. Another method
// made only of letters is lower-cased (OPTIONS → "options", so a policy can
// name it); anything else is FallbackVerb.
func verbOf(method string) string {
	switch method {
	case "GET", "HEAD":
		return "read"
	case "POST":
		return "create"
	case "PUT", "PATCH":
		return "update"
	case "DELETE":
		return "delete"
	}
	for i := 0; i < len(method); i++ {
		if method[i] < 'A' || method[i] > 'Z' {
			return FallbackVerb
		}
	}
	return strings.ToLower(method)
}

// strippedHeaders never reach the policy: they carry credentials.
var strippedHeaders = map[string]bool{
	"authorization":       true,
	"cookie":              true,
	"proxy-authorization": true,
	"x-api-key":           true,
	// Read only from a trusted proxy's HTTP check, never by the policy:
	// a client may have sent it.
	"x-forwarded-client-cert": true,
}

// forwardingHeaders name the client's address; any client can send them,
// so they reach the policy only when sidecar.trust_forwarded_for is set.
// input.request.source_ip is the address to judge by.
var forwardingHeaders = map[string]bool{
	"x-forwarded-for": true,
	"forwarded":       true,
	"x-real-ip":       true,
}

// policyHeaders copies headers for input.request.headers, without
// credentials, without HTTP/2 pseudo-headers (method, path and host have
// their own fields), without the x-svc-* headers the sidecar owns (a
// client's copy of those is spoofed, and input.user is the identity) and,
// unless trustForwardedFor, without the forwarding headers.
func policyHeaders(h map[string]string, trustForwardedFor bool) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		if keepHeader(k, trustForwardedFor) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// keepHeader says whether policyHeaders keeps header k.
func keepHeader(k string, trustForwardedFor bool) bool {
	return !strippedHeaders[k] && !strings.HasPrefix(k, ":") && !strings.HasPrefix(k, HeaderPrefix) &&
		(trustForwardedFor || !forwardingHeaders[k])
}

// bearerToken returns the credential of an Authorization header value
// using the Bearer scheme (RFC 6750; the scheme is case-insensitive), or ""
// for any other value.
func bearerToken(v string) string {
	v = strings.TrimSpace(v)
	const scheme = "bearer"
	if len(v) <= len(scheme) || !strings.EqualFold(v[:len(scheme)], scheme) {
		return ""
	}
	if c := v[len(scheme)]; c != ' ' && c != '\t' {
		return ""
	}
	return strings.TrimSpace(v[len(scheme)+1:])
}
