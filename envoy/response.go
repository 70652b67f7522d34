package envoy

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// Headers the sidecar sets on an allowed request before the proxy sends it
// upstream. Upstreams can trust them only because every response either
// overwrites or removes each of them, whatever the client sent.
const (
	HeaderUserID     = "x-svc-user-id"
	HeaderTenantID   = "x-svc-tenant-id"
	HeaderRoles      = "x-svc-roles"
	HeaderDecisionID = "x-svc-decision-id"
	// HeaderIdentity carries the signed identity token (a JWT) of an
	// allowed request when identity_token is configured; without a token
	// (not configured, or development mode's anonymous caller) a client's
	// copy is removed.
	HeaderIdentity = "x-svc-identity"
	// HeaderFailOpen is never "true" from the sidecar, which does not fail
	// open itself; it is removed from (or set "false" on) every allowed
	// request so that a client's copy never reaches the upstream.
	HeaderFailOpen = "x-svc-fail-open"
	// HeaderPrefix starts every header the sidecar owns; incoming headers
	// with it that the sidecar does not set are removed.
	HeaderPrefix = "x-svc-"
)

// DenyBody is the JSON body of every denied response (package wire);
// the check always writes decision_id, empty before the policy ran.
type DenyBody = wire.DenyBody

// verdict is a decision in transport-neutral form: both the ext_authz
// CheckResponse and the HTTP check response are rendered from it, so the
// two can never disagree.
type verdict struct {
	allow  bool
	status int        // HTTP status of a denial; 200 when allowed
	code   codes.Code // google.rpc code of the CheckResponse
	reason reason.Code
	// Identity of an allowed request.
	subject, tenantID, roles, decisionID string
	// identity is the signed identity token of an allowed request; empty
	// without one.
	identity        string
	body            DenyBody
	wwwAuthenticate string
	retryAfter      string
	// html: the client is a browser, answered with the HTML page instead
	// of the JSON body (present).
	html bool
	// login is the sign-in URL a browser is offered (or sent to); redirect
	// sends it there instead of answering the 401.
	login    string
	redirect bool
	// setCookie is a Set-Cookie value for the client: the renewed session
	// of an allow, or the cleared one of a session that ended.
	setCookie string
}

// decide turns an Authorize outcome into a verdict:
//
//   - err != nil (the engine answered but could not decide: an evaluation
//     error or timeout) → 500 with the error's reason (policy-error), in
//     both fail modes. Fail open is for a sidecar that cannot be reached,
//     which only the proxy (Envoy's failure_mode_allow) or the SDK can see;
//     an evaluation error is never a pass.
//   - token refused → 401 with WWW-Authenticate, except jwks-unavailable
//     and introspection-unavailable or -invalid (reason.Unjudged): the
//     token was never judged, the identity provider's keys or its
//     introspection endpoint could not be had, so that is a 503 in both fail modes rather than a prompt to the
//     client to fetch a new token (nor a pass in open mode).
//   - rate limited → 429 with Retry-After (whole seconds, at least 1).
//   - policy deny → 403; policy allow → OK with the identity headers.
func decide(res engine.Result, err error) verdict {
	if err != nil {
		code := reason.Of(err, reason.PolicyError)
		if code == reason.DecisionLogUnavailable {
			// Decided, but the decision log cannot take the record and
			// decision_log.overflow says deny: a denial, 503 as for a
			// dependency down, in both fail modes.
			return denied(http.StatusServiceUnavailable, codes.Unavailable, code, nil, res.Decision.DecisionID)
		}
		return denied(http.StatusInternalServerError, codes.Internal, code, nil, res.Decision.DecisionID)
	}
	if !res.Token.Allowed {
		code := res.Token.Reason
		if code == "" {
			code = reason.TokenMalformed
		}
		if reason.Unjudged(code) {
			return denied(http.StatusServiceUnavailable, codes.Unavailable, code, nil, res.Decision.DecisionID)
		}
		v := denied(http.StatusUnauthorized, codes.Unauthenticated, code, nil, res.Decision.DecisionID)
		v.wwwAuthenticate = wwwAuthenticate(code)
		return v
	}
	d := res.Decision
	switch {
	case d.Reason == reason.RateLimited:
		v := denied(http.StatusTooManyRequests, codes.ResourceExhausted, reason.RateLimited, d.DenyReasons, d.DecisionID)
		v.retryAfter = retryAfterSeconds(d.RetryAfter)
		v.subject, v.tenantID = res.Token.Subject, res.Token.TenantID
		return v
	case !d.Allow:
		code := d.Reason
		if code == "" || code == reason.PolicyAllow {
			code = reason.PolicyDeny
		}
		v := denied(http.StatusForbidden, codes.PermissionDenied, code, d.DenyReasons, d.DecisionID)
		v.subject, v.tenantID = res.Token.Subject, res.Token.TenantID
		return v
	}
	subject, tenant := caller(res)
	code := d.Reason
	if code == "" {
		code = reason.PolicyAllow
	}
	return verdict{
		allow: true, status: http.StatusOK, code: codes.OK, reason: code,
		subject:    headerSafe(subject),
		tenantID:   headerSafe(tenant),
		roles:      rolesHeader(res.Input.User.Roles),
		decisionID: headerSafe(d.DecisionID),
	}
}

// caller is the subject and tenant of an allowed decision: the policy
// input's user, else the token's.
func caller(res engine.Result) (subject, tenant string) {
	subject, tenant = res.Input.User.ID, res.Input.User.TenantID
	if subject == "" {
		subject = res.Token.Subject
	}
	if tenant == "" {
		tenant = res.Token.TenantID
	}
	return subject, tenant
}

// invalidInput is the verdict on a request the mapping refused: 400 with
// the error's code (path-invalid, method-untrusted, or input-invalid)
// and the decision id the refusal was recorded under (Server.refuse).
func invalidInput(err error, decisionID string) verdict {
	return denied(http.StatusBadRequest, codes.InvalidArgument, reason.Of(err, reason.InputInvalid), nil, decisionID)
}

func denied(status int, code codes.Code, rc reason.Code, reasons []string, decisionID string) verdict {
	if reasons == nil {
		reasons = []string{}
	}
	return verdict{
		status: status, code: code, reason: rc, decisionID: decisionID,
		body: DenyBody{DenyReasons: reasons, Reason: string(rc), DecisionID: decisionID},
	}
}

// wwwAuthenticate follows RFC 6750 section 3: a request without any token
// gets a bare challenge, one with a bad token the invalid_token error.
// A refused API key is challenged in its own scheme, ApiKey, as the key
// was presented (Authorization: ApiKey or X-Api-Key).
func wwwAuthenticate(code reason.Code) string {
	switch {
	case code == reason.TokenMissing:
		return "Bearer"
	case reason.IsAPIKey(code):
		return `ApiKey error="invalid_key", error_description="` + string(code) + `"`
	}
	return `Bearer error="invalid_token", error_description="` + string(code) + `"`
}

func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// rolesHeader renders roles as the x-svc-roles value: the roles joined with
// "," and nothing else, each role percent-encoded (RFC 3986) for "%", ",",
// '"', space and control characters, so that a role holding a comma cannot
// pass for two roles upstream ("x,admin" becomes "x%2Cadmin"), nor one
// with spaces for another once an upstream trims around the commas. Roles
// made of other characters, as nearly all are, appear unchanged.
func rolesHeader(roles []string) string {
	clean := true
	for _, r := range roles {
		if strings.IndexFunc(r, roleNeedsEscape) >= 0 {
			clean = false
			break
		}
	}
	if clean {
		return strings.Join(roles, ",")
	}
	var b strings.Builder
	for i, r := range roles {
		if i > 0 {
			b.WriteByte(',')
		}
		for j := 0; j < len(r); j++ {
			if c := r[j]; c < utf8.RuneSelf && roleNeedsEscape(rune(c)) {
				b.WriteByte('%')
				b.WriteByte(upperHex[c>>4])
				b.WriteByte(upperHex[c&0xF])
			} else {
				b.WriteByte(c)
			}
		}
	}
	return b.String()
}

const upperHex = "0123456789ABCDEF"

func roleNeedsEscape(r rune) bool {
	return r == '%' || r == ',' || r == '"' || r == ' ' || r < 0x20 || r == 0x7f
}

// headerSafe drops the bytes a header value cannot hold (control
// characters), so a claim cannot split or forge a header.
func headerSafe(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return strings.Map(func(r rune) rune {
				if r < 0x20 && r != '\t' || r == 0x7f {
					return -1
				}
				return r
			}, v)
		}
	}
	return v
}

func (v *verdict) bodyJSON() []byte {
	// DenyBody's own encoder: json.Marshal would call it, then copy and
	// check its output.
	b, err := v.body.MarshalJSON()
	if err != nil { // a struct of strings always marshals
		return []byte(`{"allow":false,"deny_reasons":[],"reason":"` + string(reason.PolicyError) + `","decision_id":""}`)
	}
	return b
}

// CheckResponse renders the outcome of Authorize as an ext_authz
// CheckResponse:
//
//   - allow: status OK; upstream headers x-svc-user-id, x-svc-tenant-id,
//     x-svc-roles (comma-joined, each role percent-encoded for "%", ",",
//     '"', space and controls), x-svc-decision-id and, with an identity
//     token, x-svc-identity overwrite whatever the client sent;
//     x-svc-fail-open is removed, and so is x-svc-identity without a
//     token;
//   - invalid token: UNAUTHENTICATED, HTTP 401 with WWW-Authenticate;
//   - policy deny: PERMISSION_DENIED, HTTP 403;
//   - rate limited: RESOURCE_EXHAUSTED, HTTP 429 with Retry-After;
//   - engine cannot decide (err != nil): INTERNAL, HTTP 500 with reason
//     policy-error, whatever sdk.fail_mode says: fail open is Envoy's
//     failure_mode_allow, for a sidecar that cannot be reached.
//
// Denials carry the JSON DenyBody. Every response carries dynamic metadata
// {decision_id, subject, tenant_id, reason} for access logs and later
// filters (namespace envoy.filters.http.ext_authz).
func CheckResponse(res engine.Result, err error) *authv3.CheckResponse {
	v := decide(res, err)
	return v.checkResponse(nil)
}

// checkResponse renders v; extraRemove lists incoming x-svc-* headers the
// sidecar does not set, removed from an allowed request.
func (v *verdict) checkResponse(extraRemove []string) *authv3.CheckResponse {
	return v.checkResponseInto(extraRemove, nil)
}

// checkResponseInto is checkResponse, building an allowed answer in ok
// when it is not nil.
func (v *verdict) checkResponseInto(extraRemove []string, ok *okBlock) *authv3.CheckResponse {
	if v.allow {
		if ok == nil {
			ok = new(okBlock)
		}
		return v.okResponse(extraRemove, ok)
	}
	resp := &authv3.CheckResponse{
		Status:          &rpcstatus.Status{Code: int32(v.code)},
		DynamicMetadata: v.metadata(new(metadataBlock)),
	}
	if v.code != codes.OK {
		resp.Status.Message = string(v.reason)
	}
	ct, body := v.answer()
	status := v.status
	headers := []*corev3.HeaderValueOption{setHeader("content-type", ct)}
	if v.html {
		for _, kv := range pageHeaders {
			headers = append(headers, setHeader(kv[0], kv[1]))
		}
	}
	if v.redirect {
		status = http.StatusFound
		headers = append(headers, setHeader("location", v.login))
	} else if v.wwwAuthenticate != "" {
		headers = append(headers, setHeader("www-authenticate", v.wwwAuthenticate))
	}
	if v.retryAfter != "" {
		headers = append(headers, setHeader("retry-after", v.retryAfter))
	}
	if v.setCookie != "" {
		headers = append(headers, addHeader(headerSetCookie, v.setCookie))
	}
	resp.HttpResponse = &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode(status)},
		Headers: headers,
		Body:    string(body),
	}}
	return resp
}

// okBlock holds every message of an allowed check's answer, so that the
// answer to nearly every check is one allocation (and the metadata map)
// rather than fifteen. The messages live as long as the answer does.
type okBlock struct {
	resp    authv3.CheckResponse
	status  rpcstatus.Status
	oneof   authv3.CheckResponse_OkResponse
	ok      authv3.OkHttpResponse
	meta    metadataBlock
	vals    [5]corev3.HeaderValue
	opts    [5]corev3.HeaderValueOption
	headers [5]*corev3.HeaderValueOption
	remove  [1]string
}

func (v *verdict) okResponse(extraRemove []string, b *okBlock) *authv3.CheckResponse {
	kv, n := allowedHeaders(v)
	for i := range n {
		b.vals[i].Key, b.vals[i].Value = kv[i][0], kv[i][1]
		b.opts[i].Header = &b.vals[i]
		b.opts[i].AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		b.headers[i] = &b.opts[i]
	}
	b.remove[0] = HeaderFailOpen
	b.ok.Headers = b.headers[:n]
	b.ok.HeadersToRemove = b.remove[:]
	if len(extraRemove) > 0 {
		b.ok.HeadersToRemove = append(b.ok.HeadersToRemove[:1:1], extraRemove...)
	}
	if v.setCookie != "" {
		// A renewed session, to the client: rare, so not in the block.
		b.ok.ResponseHeadersToAdd = []*corev3.HeaderValueOption{addHeader(headerSetCookie, v.setCookie)}
	}
	b.oneof.OkResponse = &b.ok
	b.status.Code = int32(v.code)
	b.resp.Status = &b.status
	b.resp.DynamicMetadata = v.metadata(&b.meta)
	b.resp.HttpResponse = &b.oneof
	return &b.resp
}

// metadataBlock holds the dynamic metadata's four values.
type metadataBlock struct {
	st   structpb.Struct
	vals [4]structpb.Value
	strs [4]structpb.Value_StringValue
}

func (v *verdict) metadata(b *metadataBlock) *structpb.Struct {
	b.strs = [4]structpb.Value_StringValue{
		{StringValue: v.decisionID}, {StringValue: v.subject}, {StringValue: v.tenantID}, {StringValue: string(v.reason)},
	}
	for i := range b.vals {
		b.vals[i].Kind = &b.strs[i]
	}
	b.st.Fields = map[string]*structpb.Value{
		"decision_id": &b.vals[0],
		"subject":     &b.vals[1],
		"tenant_id":   &b.vals[2],
		"reason":      &b.vals[3],
	}
	return &b.st
}

// setHeader overwrites the header or adds it. The deprecated append field
// stays unset: Envoy reads append_action when append is absent.
func setHeader(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: key, Value: value},
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// headerSetCookie delivers a renewed session (or clears an ended one).
const headerSetCookie = "set-cookie"

// addHeader adds the header beside any the response has (Set-Cookie:
// the upstream's own cookies stay).
func addHeader(key, value string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header:       &corev3.HeaderValue{Key: key, Value: value},
		AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD,
	}
}

// spoofedHeaders lists the incoming x-svc-* headers an allow does not
// overwrite, so that they are removed before the request goes upstream;
// identity says that the allow sets x-svc-identity.
func spoofedHeaders(h map[string]string, identity bool) []string {
	var out []string
	for k := range h {
		if len(k) <= len(HeaderPrefix) || !strings.EqualFold(k[:len(HeaderPrefix)], HeaderPrefix) {
			continue
		}
		switch strings.ToLower(k) {
		case HeaderUserID, HeaderTenantID, HeaderRoles, HeaderDecisionID, HeaderFailOpen:
			continue
		case HeaderIdentity:
			if identity {
				continue
			}
		}
		out = append(out, strings.ToLower(k))
	}
	slices.Sort(out)
	return out
}
