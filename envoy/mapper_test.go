package envoy

import (
	"errors"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
)

const testTenant = "acme"

var testRoutes = []config.Route{
	{Path: "/api/reports/{id}/export", Methods: []string{"POST"}, Action: "reports:export"},
	{Path: "/api/{resource}/{id}"},
	{Path: "/api/{resource}"},
	{Path: "/t/{tenant}/{resource}/{id}"},
	{Path: "/files/{id}.json", Resource: "files"},
	{Path: "/admin/*", Resource: "admin", Action: "admin:access"},
}

// checkReq builds a CheckRequest for method and path with header pairs.
func checkReq(method, path string, headers map[string]string, ext map[string]string) *authv3.CheckRequest {
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method:  method,
			Path:    path,
			Host:    "shop.example",
			Headers: headers,
		}},
		ContextExtensions: ext,
	}}
}

func req(method, path string) *policy.Request {
	return &policy.Request{Method: method, Path: path, Host: "shop.example"}
}

// mapped is the input the mapper makes of r for the default tenant: the
// action, the resource type and id (empty when the path has none).
func mapped(action, resource, id string, r *policy.Request) engine.Input {
	return engine.Input{Action: action, Resource: policy.Resource{Type: resource, ID: id, Tenant: testTenant}, Request: r}
}

func TestFromCheckRequest(t *testing.T) {
	m, err := NewMapper(testTenant, testRoutes)
	if err != nil {
		t.Fatal(err)
	}
	bearer := map[string]string{"authorization": "Bearer tok"}
	tests := []struct {
		name      string
		req       *authv3.CheckRequest
		wantToken string
		want      engine.Input
	}{
		{
			name:      "default GET reads first segment with id",
			req:       checkReq("GET", "/orders/42", bearer, nil),
			wantToken: "tok",
			want:      mapped("orders:read", "orders", "42", req("GET", "/orders/42")),
		},
		{
			name: "default HEAD is read",
			req:  checkReq("HEAD", "/orders", nil, nil),
			want: mapped("orders:read", "orders", "", req("HEAD", "/orders")),
		},
		{
			name: "default POST is create",
			req:  checkReq("POST", "/orders", nil, nil),
			want: mapped("orders:create", "orders", "", req("POST", "/orders")),
		},
		{
			name: "default PUT is update",
			req:  checkReq("PUT", "/orders/7", nil, nil),
			want: mapped("orders:update", "orders", "7", req("PUT", "/orders/7")),
		},
		{
			name: "default PATCH is update",
			req:  checkReq("PATCH", "/orders/7", nil, nil),
			want: mapped("orders:update", "orders", "7", req("PATCH", "/orders/7")),
		},
		{
			name: "default DELETE is delete",
			req:  checkReq("DELETE", "/orders/7", nil, nil),
			want: mapped("orders:delete", "orders", "7", req("DELETE", "/orders/7")),
		},
		{
			name: "lower-case method is upper-cased",
			req:  checkReq("delete", "/orders/7", nil, nil),
			want: mapped("orders:delete", "orders", "7", req("DELETE", "/orders/7")),
		},
		{
			name: "unknown word method is lower-cased",
			req:  checkReq("OPTIONS", "/orders", nil, nil),
			want: mapped("orders:options", "orders", "", req("OPTIONS", "/orders")),
		},
		{
			name: "method that is not a word falls back to access",
			req:  checkReq("M-SEARCH", "/orders", nil, nil),
			want: mapped("orders:"+FallbackVerb, "orders", "", req("M-SEARCH", "/orders")),
		},
		{
			name: "root path is the root resource",
			req:  checkReq("GET", "/", nil, nil),
			want: mapped(RootResource+":read", RootResource, "", req("GET", "/")),
		},
		{
			name: "deeper default path has no id",
			req:  checkReq("GET", "/orders/42/items", nil, nil),
			want: mapped("orders:read", "orders", "", req("GET", "/orders/42/items")),
		},
		{
			name: "route template captures resource and id",
			req:  checkReq("GET", "/api/invoices/9", nil, nil),
			want: mapped("invoices:read", "invoices", "9", req("GET", "/api/invoices/9")),
		},
		{
			name: "route without id",
			req:  checkReq("POST", "/api/invoices", nil, nil),
			want: mapped("invoices:create", "invoices", "", req("POST", "/api/invoices")),
		},
		{
			name: "earlier route with method and action wins",
			req:  checkReq("POST", "/api/reports/3/export", nil, nil),
			want: mapped("reports:export", "reports", "3", req("POST", "/api/reports/3/export")),
		},
		{
			name: "method-restricted route skipped for other methods",
			req:  checkReq("GET", "/api/reports/3/export", nil, nil),
			want: mapped("api:read", "api", "", req("GET", "/api/reports/3/export")),
		},
		{
			name: "route captures tenant",
			req:  checkReq("GET", "/t/globex/orders/1", nil, nil),
			want: engine.Input{Action: "orders:read", Resource: policy.Resource{Type: "orders", ID: "1", Tenant: "globex"},
				Request: req("GET", "/t/globex/orders/1")},
		},
		{
			name: "mixed segment template with fixed resource",
			req:  checkReq("GET", "/files/a.b.json", nil, nil),
			want: mapped("files:read", "files", "a.b", req("GET", "/files/a.b.json")),
		},
		{
			name: "wildcard route matches any depth",
			req:  checkReq("DELETE", "/admin/users/5/sessions", nil, nil),
			want: mapped("admin:access", "admin", "", req("DELETE", "/admin/users/5/sessions")),
		},
		{
			name: "context extensions win over the route",
			req: checkReq("GET", "/api/invoices/9", nil, map[string]string{
				ExtAction: "billing:view", ExtResource: "ledger", ExtResourceID: "L1", ExtTenant: "initech"}),
			want: engine.Input{Action: "billing:view", Resource: policy.Resource{Type: "ledger", ID: "L1", Tenant: "initech"},
				Request: req("GET", "/api/invoices/9")},
		},
		{
			name: "extension resource alone derives the action",
			req:  checkReq("PUT", "/api/invoices/9", nil, map[string]string{ExtResource: "ledger"}),
			want: mapped("ledger:update", "ledger", "9", req("PUT", "/api/invoices/9")),
		},
		{
			name: "extension action alone keeps the route's resource",
			req:  checkReq("GET", "/api/invoices/9", nil, map[string]string{ExtAction: "invoices:export"}),
			want: mapped("invoices:export", "invoices", "9", req("GET", "/api/invoices/9")),
		},
		{
			name: "extension action without route names the resource",
			req:  checkReq("GET", "/v2/stats", nil, map[string]string{ExtAction: "reports:read"}),
			want: mapped("reports:read", "reports", "stats", req("GET", "/v2/stats")),
		},
		{
			name: "upper-case header keys from a non-Envoy client",
			req: checkReq("GET", "/orders", map[string]string{
				"Authorization": "Bearer up", "Cookie": "sid=1", "X-Svc-Roles": "admin", "X-Trace": "t"}, nil),
			wantToken: "up",
			want: mapped("orders:read", "orders", "",
				&policy.Request{Method: "GET", Path: "/orders", Host: "shop.example",
					Headers: map[string]string{"x-trace": "t"}}),
		},
		{
			name: "query parsed and stripped from path",
			req:  checkReq("GET", "/orders?page=2&tag=a&tag=b&empty=", nil, nil),
			want: mapped("orders:read", "orders", "",
				&policy.Request{Method: "GET", Path: "/orders", Host: "shop.example",
					Query: map[string]string{"page": "2", "tag": "a,b", "empty": ""}}),
		},
		{
			name: "credential headers and pseudo-headers stripped",
			req: checkReq("GET", "/orders", map[string]string{
				"authorization": "Bearer tok", "cookie": "sid=1", "proxy-authorization": "Basic x",
				":path": "/orders", ":method": "GET", "x-request-id": "r-1", "accept": "application/json",
			}, nil),
			wantToken: "tok",
			want: mapped("orders:read", "orders", "",
				&policy.Request{Method: "GET", Path: "/orders", Host: "shop.example",
					Headers: map[string]string{"x-request-id": "r-1", "accept": "application/json"}}),
		},
		{
			name:      "lower-case bearer scheme",
			req:       checkReq("GET", "/orders", map[string]string{"authorization": "bearer   tok2  "}, nil),
			wantToken: "tok2",
			want:      mapped("orders:read", "orders", "", req("GET", "/orders")),
		},
		{
			name: "basic scheme yields no token",
			req:  checkReq("GET", "/orders", map[string]string{"authorization": "Basic dXNlcjpwYXNz"}, nil),
			want: mapped("orders:read", "orders", "", req("GET", "/orders")),
		},
		{
			name: "bearer without credential yields no token",
			req:  checkReq("GET", "/orders", map[string]string{"authorization": "Bearer"}, nil),
			want: mapped("orders:read", "orders", "", req("GET", "/orders")),
		},
		{
			name: "missing bearer",
			req:  checkReq("GET", "/orders", map[string]string{"x-other": "1"}, nil),
			want: mapped("orders:read", "orders", "",
				&policy.Request{Method: "GET", Path: "/orders", Host: "shop.example", Headers: map[string]string{"x-other": "1"}}),
		},
		{
			name: "dot segments resolved before mapping",
			req:  checkReq("GET", "/public/../admin/x", nil, nil),
			want: mapped("admin:access", "admin", "", req("GET", "/admin/x")),
		},
		{
			name: "encoded dot segments resolved too",
			req:  checkReq("GET", "/public/%2e%2e/orders/1", nil, nil),
			want: mapped("orders:read", "orders", "1", req("GET", "/orders/1")),
		},
		{
			name: "percent-decoded segments and merged slashes",
			req:  checkReq("GET", "//orders//caf%C3%A9%20au%25lait/", nil, nil),
			want: mapped("orders:read", "orders", "café au%lait", req("GET", "/orders/café au%25lait")),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cred, in, err := m.FromCheckRequest(tt.req)
			if err != nil {
				t.Fatalf("FromCheckRequest: %v", err)
			}
			if cred.Bearer != tt.wantToken {
				t.Errorf("token = %q, want %q", cred.Bearer, tt.wantToken)
			}
			if diff := cmp.Diff(tt.want, in, ignoreCanonical); diff != "" {
				t.Errorf("input (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFromCheckRequestRawHeaderMap(t *testing.T) {
	m, err := NewMapper(testTenant, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
		Http: &authv3.AttributeContext_HttpRequest{HeaderMap: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
			{Key: ":method", RawValue: []byte("GET")},
			{Key: ":path", RawValue: []byte("/orders/1")},
			{Key: ":authority", RawValue: []byte("raw.example")},
			{Key: "Authorization", RawValue: []byte("Bearer raw-tok")},
			{Key: "x-tag", RawValue: []byte("a")},
			{Key: "x-tag", Value: "b"},
		}}},
	}}}
	cred, in, err := m.FromCheckRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	token := cred.Bearer
	want := mapped("orders:read", "orders", "1",
		&policy.Request{Method: "GET", Path: "/orders/1", Host: "raw.example", Headers: map[string]string{"x-tag": "a,b"}})
	if token != "raw-tok" {
		t.Errorf("token = %q", token)
	}
	if diff := cmp.Diff(want, in, ignoreCanonical); diff != "" {
		t.Errorf("input (-want +got):\n%s", diff)
	}
}

// ignoreCanonical leaves input.request's canonical fields to
// TestFromCheckRequestCanonical.
var ignoreCanonical = cmpopts.IgnoreFields(policy.Request{}, "CanonicalPath", "Format")

// TestFromCheckRequestCanonical: the spellings an upstream serves as one
// resource map to one action, resource and canonical path; a known format
// suffix is cut from captures and the default id, an unknown one is not;
// ids keep their case. With case-sensitive routes, the resource and the
// canonical path keep the request's case.
func TestFromCheckRequestCanonical(t *testing.T) {
	routes := append(append([]config.Route{}, testRoutes...),
		config.Route{Path: "/orders/{id}", Resource: "orders"},
		config.Route{Path: "/docs/{name}.pdf", Resource: "docs"},
		config.Route{Path: "/users/{id}", Resource: "users"},
	)
	type want struct {
		action, resource, id, canonical, format string
	}
	for _, tc := range []struct {
		method, target string
		folded, strict want
	}{
		{"DELETE", "/orders/42.json",
			want{"orders:delete", "orders", "42", "/orders/42", "json"},
			want{"orders:delete", "orders", "42", "/orders/42", "json"}},
		{"DELETE", "/orders/A7.JSON",
			want{"orders:delete", "orders", "A7", "/orders/a7", "json"},
			want{"orders:delete", "orders", "A7", "/orders/A7", "json"}},
		{"GET", "/orders/42.pdf",
			want{"orders:read", "orders", "42.pdf", "/orders/42.pdf", ""},
			want{"orders:read", "orders", "42.pdf", "/orders/42.pdf", ""}},
		{"GET", "/users/alice@example.com",
			want{"users:read", "users", "alice@example.com", "/users/alice@example.com", ""},
			want{"users:read", "users", "alice@example.com", "/users/alice@example.com", ""}},
		{"GET", "/docs/Q3.pdf",
			want{"docs:read", "docs", "", "/docs/q3.pdf", ""},
			want{"docs:read", "docs", "", "/docs/Q3.pdf", ""}},
		{"GET", "/files/42.json",
			want{"files:read", "files", "42", "/files/42", "json"},
			want{"files:read", "files", "42", "/files/42", "json"}},
		{"DELETE", "/Invoices/Inv-7",
			want{"invoices:delete", "invoices", "Inv-7", "/invoices/inv-7", ""},
			want{"Invoices:delete", "Invoices", "Inv-7", "/Invoices/Inv-7", ""}},
		{"DELETE", "/invoices/7.xml",
			want{"invoices:delete", "invoices", "7", "/invoices/7", "xml"},
			want{"invoices:delete", "invoices", "7", "/invoices/7", "xml"}},
		{"GET", "/Invoices.csv",
			want{"invoices:read", "invoices", "", "/invoices", "csv"},
			want{"Invoices:read", "Invoices", "", "/Invoices", "csv"}},
		{"GET", "/releases/1.2.3",
			want{"releases:read", "releases", "1.2.3", "/releases/1.2.3", ""},
			want{"releases:read", "releases", "1.2.3", "/releases/1.2.3", ""}},
		{"GET", "/api/Orders/7.json",
			want{"orders:read", "orders", "7", "/api/orders/7", "json"},
			want{"Orders:read", "Orders", "7", "/api/Orders/7", "json"}},
		{"POST", "/api/reports/R7/export.json",
			want{"reports:export", "reports", "R7", "/api/reports/r7/export", "json"},
			want{"reports:export", "reports", "R7", "/api/reports/R7/export", "json"}},
		{"GET", "//orders/x/../%34%32.json",
			want{"orders:read", "orders", "42", "/orders/42", "json"},
			want{"orders:read", "orders", "42", "/orders/42", "json"}},
	} {
		for _, caseSensitive := range []bool{false, true} {
			m, err := NewMapper(testTenant, routes)
			if err != nil {
				t.Fatal(err)
			}
			m.WithCaseSensitiveRoutes(caseSensitive)
			w := tc.folded
			if caseSensitive {
				w = tc.strict
			}
			_, in, err := m.FromCheckRequest(checkReq(tc.method, tc.target, nil, nil))
			if err != nil {
				t.Errorf("%s %s (case-sensitive %v): %v", tc.method, tc.target, caseSensitive, err)
				continue
			}
			got := want{in.Action, in.Resource.Type, in.Resource.ID, in.Request.CanonicalPath, in.Request.Format}
			if got != w {
				t.Errorf("%s %s (case-sensitive %v):\n got %+v\nwant %+v", tc.method, tc.target, caseSensitive, got, w)
			}
			// The engine sets the same fields from the normalized path.
			canonical, format, err := m.canon.Path(in.Request.Path)
			if err != nil || canonical != got.canonical || format != got.format {
				t.Errorf("%s %s: the engine reads %q as %q %q %v", tc.method, tc.target, in.Request.Path, canonical, format, err)
			}
		}
	}
}

func TestFromCheckRequestErrors(t *testing.T) {
	m, err := NewMapper(testTenant, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  *authv3.CheckRequest
		code reason.Code
	}{
		{"nil request", nil, reason.InputInvalid},
		{"no attributes", &authv3.CheckRequest{}, reason.InputInvalid},
		{"no http attributes", &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{}}}, reason.InputInvalid},
		{"no method", checkReq("", "/orders", nil, nil), reason.InputInvalid},
		{"no path", checkReq("GET", "", nil, nil), reason.InputInvalid},
		{"relative path", checkReq("GET", "orders", nil, nil), reason.PathInvalid},
		{"asterisk form", checkReq("OPTIONS", "*", nil, nil), reason.PathInvalid},
		{"malformed escape", checkReq("GET", "/orders/%zz", nil, nil), reason.PathInvalid},
		{"truncated escape", checkReq("GET", "/orders/%4", nil, nil), reason.PathInvalid},
		{"invalid utf-8", checkReq("GET", "/orders/%ff", nil, nil), reason.PathInvalid},
		// Servlet containers cut ";..." off a segment: "/public/..;/admin"
		// is their "/admin".
		{"path parameter climbing out", checkReq("GET", "/public/..;/admin/users", nil, nil), reason.PathInvalid},
		{"path parameter", checkReq("GET", "/orders;jsessionid=1/42", nil, nil), reason.PathInvalid},
		{"encoded path parameter", checkReq("GET", "/public/..%3B/admin", nil, nil), reason.PathInvalid},
		// nginx and WSGI decode %2F and %5C into separators.
		{"encoded slash", checkReq("GET", "/public%2F..%2Fadmin/users", nil, nil), reason.PathInvalid},
		{"encoded slash lower case", checkReq("GET", "/public/..%2fadmin", nil, nil), reason.PathInvalid},
		{"encoded backslash", checkReq("GET", "/public/..%5Cadmin", nil, nil), reason.PathInvalid},
		{"backslash", checkReq("GET", "/public/..\\admin", nil, nil), reason.PathInvalid},
		// Rails, Express and Spring apps turn a POST carrying an override
		// header into the method it names.
		{"method override", checkReq("POST", "/orders/1", map[string]string{"x-http-method-override": "DELETE"}, nil), reason.InputInvalid},
		{"method override, other name", checkReq("POST", "/orders/1", map[string]string{"x-http-method": "delete"}, nil), reason.InputInvalid},
		{"method override, third name", checkReq("GET", "/orders/1", map[string]string{"x-method-override": "PUT"}, nil), reason.InputInvalid},
		{"method override naming two", checkReq("POST", "/orders/1", map[string]string{"x-http-method-override": "POST,DELETE"}, nil), reason.InputInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := m.FromCheckRequest(tt.req)
			if err == nil {
				t.Fatal("want an error")
			}
			if !errors.Is(err, &reason.Error{Code: tt.code}) {
				t.Fatalf("error %v does not carry %s", err, tt.code)
			}
		})
	}
}

// TestMethodOverrideNamingTheMethodPasses: an override header that names
// the request's own method changes nothing and is allowed.
func TestMethodOverrideNamingTheMethodPasses(t *testing.T) {
	m, err := NewMapper(testTenant, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, in, err := m.FromCheckRequest(checkReq("DELETE", "/orders/1", map[string]string{"x-http-method-override": "delete"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	if in.Action != "orders:delete" {
		t.Fatalf("action %q, want orders:delete", in.Action)
	}
}

func TestNewMapperRejectsBadTemplates(t *testing.T) {
	tests := []struct {
		name string
		path string
	}{
		{"relative", "api/{resource}"},
		{"unclosed", "/api/{resource"},
		{"unbalanced close", "/api/resource}"},
		{"empty placeholder", "/api/{}"},
		{"nested", "/api/{a{b}}"},
		{"bad escape", "/api/%zz"},
		{"bad escape in mixed segment", "/api/%zz{id}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewMapper(testTenant, []config.Route{{Path: tt.path}}); err == nil {
				t.Fatalf("NewMapper(%q) succeeded", tt.path)
			}
		})
	}
}

// TestSessionCookie: a check takes the token from the session cookie
// only without an Authorization header, and the gateway's "__Host-"
// cookie decides whenever the request carries it, wherever it stands:
// an unprefixed cookie a sibling subdomain tossed never displaces it.
func TestSessionCookie(t *testing.T) {
	req := func(h map[string]string) *authv3.CheckRequest {
		h[":method"], h[":path"] = "GET", "/orders/1"
		return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
			Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/orders/1", Headers: h},
		}}}
	}
	tests := []struct {
		name     string
		cookie   string // the mapper's session cookie, "" for none
		prefixed bool   // the gateways set only prefixed cookies
		headers  map[string]string
		want     string
	}{
		// Behind Secure gateways, a tossed unprefixed cookie alone is no
		// session: the browser that carries it has none of its own.
		{"prefixed only: a tossed cookie alone", "svc_session", true, map[string]string{"cookie": "svc_session=tossed"}, ""},
		{"prefixed only: __Host- cookie", "svc_session", true, map[string]string{"cookie": "svc_session=tossed; __Host-svc_session=host.tok"}, "host.tok"},
		{"prefixed only: bearer", "svc_session", true, map[string]string{"authorization": "Bearer hdr", "cookie": "svc_session=c"}, "hdr"},
		{"cookie when no authorization", "svc_session", false, map[string]string{"cookie": "a=1; svc_session=tok.from.cookie; b=2"}, "tok.from.cookie"},
		{"bearer wins over cookie", "svc_session", false, map[string]string{"authorization": "Bearer hdr", "cookie": "svc_session=c"}, "hdr"},
		{"another scheme is not replaced by the cookie", "svc_session", false, map[string]string{"authorization": "Basic x", "cookie": "svc_session=c"}, ""},
		{"no cookie configured", "", false, map[string]string{"cookie": "svc_session=c"}, ""},
		{"other cookie only", "svc_session", false, map[string]string{"cookie": "svc_session_x=c"}, ""},
		{"__Host- cookie", "svc_session", false, map[string]string{"cookie": "a=1; __Host-svc_session=host.tok; b=2"}, "host.tok"},
		// A sibling subdomain tosses svc_session with Domain=.example.com
		// and a longer path, so the browser sends it first.
		{"__Host- cookie over a tossed one before it", "svc_session", false, map[string]string{"cookie": "svc_session=tossed; __Host-svc_session=host.tok"}, "host.tok"},
		{"__Host- cookie over a tossed one after it", "svc_session", false, map[string]string{"cookie": "__Host-svc_session=host.tok; svc_session=tossed"}, "host.tok"},
		{"__Host- cookie in a second header", "svc_session", false, map[string]string{"cookie": "svc_session=tossed, __Host-svc_session=host.tok"}, "host.tok"},
		{"empty __Host- cookie is not filled by a tossed one", "svc_session", false, map[string]string{"cookie": "svc_session=tossed; __Host-svc_session="}, ""},
		{"first unprefixed cookie without a __Host- one", "svc_session", false, map[string]string{"cookie": "svc_session=first; svc_session=second"}, "first"},
		{"__Host- cookie of another name", "svc_session", false, map[string]string{"cookie": "__Host-svc_session_req=r; __Host-other=o"}, ""},
		{"__Host- custom name", "app_sess", false, map[string]string{"cookie": "app_sess=tossed; __Host-app_sess=host.tok"}, "host.tok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := NewMapper(testTenant, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.cookie != "" {
				m.WithSessionCookie(tt.cookie, tt.prefixed)
			}
			cred, in, err := m.FromCheckRequest(req(tt.headers))
			if err != nil {
				t.Fatal(err)
			}
			if token := cred.Bearer; token != tt.want {
				t.Errorf("token = %q, want %q", token, tt.want)
			}
			if _, ok := in.Request.Headers["cookie"]; ok {
				t.Error("the cookie header reached the policy input")
			}
		})
	}
}

// The credential comes from the Authorization header when there is one
// (ApiKey or Bearer scheme), else from X-Api-Key; neither header reaches
// the policy's input.
func TestFromCheckRequestCredential(t *testing.T) {
	m, err := NewMapper(testTenant, nil)
	if err != nil {
		t.Fatal(err)
	}
	const key = "svck_aeaqcaibaeaq_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE"
	tests := []struct {
		name    string
		headers map[string]string
		want    engine.Credential
	}{
		{"apikey scheme", map[string]string{"authorization": "ApiKey " + key}, engine.APIKey(key)},
		{"apikey scheme any case", map[string]string{"authorization": "APIKEY\t" + key + " "}, engine.APIKey(key)},
		{"x-api-key", map[string]string{"x-api-key": " " + key}, engine.APIKey(key)},
		{"bearer wins over x-api-key", map[string]string{"authorization": "Bearer tok", "x-api-key": key}, engine.BearerToken("tok")},
		{"other scheme with x-api-key", map[string]string{"authorization": "Basic dTpw", "x-api-key": key}, engine.Credential{}},
		{"apikey without a key", map[string]string{"authorization": "ApiKey"}, engine.Credential{}},
		{"none", map[string]string{}, engine.Credential{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.headers["x-tag"] = "kept"
			cred, in, err := m.FromCheckRequest(checkReq("GET", "/orders/1", tt.headers, nil))
			if err != nil {
				t.Fatal(err)
			}
			if cred != tt.want {
				t.Errorf("credential = %+v, want %+v", cred, tt.want)
			}
			if diff := cmp.Diff(map[string]string{"x-tag": "kept"}, in.Request.Headers); diff != "" {
				t.Errorf("input.request.headers (-want +got):\n%s", diff)
			}
		})
	}
}
