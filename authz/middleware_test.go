package authz_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/servertest"
	"github.com/svc-dev/svc/reason"
)

// routeAction maps /orders/... to orders:<verb by method>; other paths
// only validate the token.
func routeAction(r *http.Request) string {
	if !strings.HasPrefix(r.URL.Path, "/orders") {
		return ""
	}
	verb := map[string]string{http.MethodGet: "read", http.MethodPost: "create", http.MethodDelete: "delete"}[r.Method]
	return "orders:" + verb
}

func TestMiddleware(t *testing.T) {
	p := servertest.NewIDP(t)
	eng := servertest.NewEngine(t, p, func(c *config.Config) {
		c.RateLimit = config.RateLimit{PerTenant: map[string]int{"limited": 1}}
	})

	sidecar := servertest.ServeGRPC(t, servertest.NewServer(t, eng))
	dead := testkit.DeadAddr(t)
	// The IdP is down and no key was ever fetched.
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	noKeys := servertest.NewEngine(t, nil, func(c *config.Config) { c.SDK.JWKSURL = down.URL; c.SDK.FailMode = config.FailClosed })
	conflictClosed := servertest.NewEngine(t, p, func(c *config.Config) { c.Policy.Dir = "testdata/policy-conflict" })
	conflictOpen := servertest.NewEngine(t, nil, func(c *config.Config) { c.Policy.Dir = "testdata/policy-conflict" })

	viewer := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	expired := p.TokenFor(t, map[string]any{"sub": "alice", "tenant_id": tenant, "exp": time.Now().Add(-time.Hour).Unix(), "iat": servertest.FixedIat})
	limitedClaims := servertest.FixedUser("lee", "viewer")
	limitedClaims["tenant_id"] = "limited"
	limited := p.TokenFor(t, limitedClaims)
	otherClaims := servertest.FixedUser("mallory", "admin")
	otherClaims["tenant_id"] = "globex"
	otherTenant := p.TokenFor(t, otherClaims)

	viaSidecarOpen := newClient(t, sidecar, authz.FailOpen)
	viaSidecarClosed := newClient(t, sidecar, authz.FailClosed)
	deadOpen := newClient(t, dead, authz.FailOpen)
	deadClosed := newClient(t, dead, authz.FailClosed)
	local := server.Local(eng)
	adminClosed := func(r *http.Request) string {
		if strings.HasPrefix(r.URL.Path, "/admin") {
			return authz.FailClosed
		}
		return ""
	}

	tests := []struct {
		name      string
		authz     authz.Authorizer
		opts      authz.MiddlewareOptions
		method    string
		path      string
		auth      string // Authorization header
		status    int
		user      *authz.User // expected on 200
		deny      *authz.DenyBody
		challenge string // expected WWW-Authenticate
	}{
		{name: "valid token", authz: viaSidecarOpen, path: "/profile", auth: "Bearer " + viewer, status: 200,
			user: &authz.User{Subject: "alice", TenantID: tenant, Reason: reason.OK}},
		{name: "valid token in-process", authz: local, path: "/profile", auth: "Bearer " + viewer, status: 200,
			user: &authz.User{Subject: "alice", TenantID: tenant, Reason: reason.OK}},
		{name: "token of another tenant", authz: viaSidecarOpen, path: "/profile", auth: "Bearer " + otherTenant, status: 403,
			deny: &authz.DenyBody{Reason: string(reason.TenantMismatch)}},
		{name: "token of another tenant in-process", authz: local, path: "/profile", auth: "Bearer " + otherTenant, status: 403,
			deny: &authz.DenyBody{Reason: string(reason.TenantMismatch)}},
		{name: "no Authorization header", authz: viaSidecarOpen, path: "/profile", status: 401,
			deny: &authz.DenyBody{Reason: string(reason.TokenMissing)}, challenge: `Bearer`},
		{name: "not a bearer scheme", authz: viaSidecarOpen, path: "/profile", auth: "Basic YTpi", status: 401,
			deny: &authz.DenyBody{Reason: string(reason.TokenMissing)}, challenge: `Bearer`},
		{name: "expired token", authz: viaSidecarOpen, path: "/profile", auth: "Bearer " + expired, status: 401,
			deny: &authz.DenyBody{Reason: string(reason.TokenExpired)}, challenge: `Bearer error="invalid_token", error_description="token-expired"`},
		{name: "expired token, fail closed", authz: viaSidecarClosed, path: "/profile", auth: "Bearer " + expired, status: 401,
			deny: &authz.DenyBody{Reason: string(reason.TokenExpired)}, challenge: `Bearer error="invalid_token", error_description="token-expired"`},
		{name: "realm announced", authz: viaSidecarOpen, opts: authz.MiddlewareOptions{Realm: "shop"}, path: "/profile", auth: "Bearer junk", status: 401,
			deny: &authz.DenyBody{Reason: string(reason.TokenMalformed)}, challenge: `Bearer realm="shop", error="invalid_token", error_description="token-malformed"`},
		{name: "policy allows", authz: viaSidecarClosed, opts: authz.MiddlewareOptions{Action: routeAction}, path: "/orders/o-1", auth: "Bearer " + viewer, status: 200,
			user: &authz.User{Subject: "alice", TenantID: tenant, Reason: reason.PolicyAllow}},
		{name: "policy denies", authz: viaSidecarClosed, opts: authz.MiddlewareOptions{Action: routeAction}, method: http.MethodDelete, path: "/orders/o-1", auth: "Bearer " + viewer, status: 403,
			deny: &authz.DenyBody{Reason: string(reason.PolicyDeny), DenyReasons: []string{"role-forbidden: viewer cannot orders:delete"}}},
		{name: "policy denies in-process", authz: local, opts: authz.MiddlewareOptions{Action: routeAction}, method: http.MethodDelete, path: "/orders/o-1", auth: "Bearer " + viewer, status: 403,
			deny: &authz.DenyBody{Reason: string(reason.PolicyDeny), DenyReasons: []string{"role-forbidden: viewer cannot orders:delete"}}},
		{name: "resource of another tenant", authz: viaSidecarClosed, opts: authz.MiddlewareOptions{Action: routeAction, Resource: func(*http.Request) authz.Resource { return authz.Resource{Tenant: "globex"} }},
			path: "/orders/o-1", auth: "Bearer " + viewer, status: 403, deny: &authz.DenyBody{Reason: string(reason.PolicyDeny), DenyReasons: []string{"tenant-mismatch"}}},
		{name: "policy sees the request", authz: viaSidecarClosed, opts: authz.MiddlewareOptions{Action: routeAction, IncludeRequest: true}, path: "/orders/o-1?expand=lines", auth: "Bearer " + viewer, status: 200,
			user: &authz.User{Subject: "alice", TenantID: tenant, Reason: reason.PolicyAllow}},
		{name: "request out of bounds", authz: viaSidecarClosed, opts: authz.MiddlewareOptions{Action: routeAction, IncludeRequest: true}, path: "/orders/" + strings.Repeat("x", 9000), auth: "Bearer " + viewer, status: 400,
			deny: &authz.DenyBody{Reason: string(reason.InputInvalid)}},
		{name: "action of the route is malformed", authz: local, opts: authz.MiddlewareOptions{Action: func(*http.Request) string { return "orders:\x01" }}, path: "/x", auth: "Bearer " + viewer, status: 500,
			deny: &authz.DenyBody{Reason: string(reason.InputInvalid)}},
		{name: "sidecar unreachable, fail open", authz: deadOpen, path: "/profile", auth: "Bearer " + viewer, status: 200,
			user: &authz.User{Subject: "anonymous", Reason: reason.FailOpen}},
		{name: "sidecar unreachable, fail open, with action", authz: deadOpen, opts: authz.MiddlewareOptions{Action: routeAction}, path: "/orders", auth: "Bearer " + viewer, status: 200,
			user: &authz.User{Subject: "anonymous", Reason: reason.FailOpen}},
		{name: "sidecar unreachable, fail closed", authz: deadClosed, path: "/profile", auth: "Bearer " + viewer, status: 503,
			deny: &authz.DenyBody{Reason: string(reason.Unavailable)}},
		{name: "sidecar unreachable, fail closed, with action", authz: deadClosed, opts: authz.MiddlewareOptions{Action: routeAction}, path: "/orders", auth: "Bearer " + viewer, status: 503,
			deny: &authz.DenyBody{Reason: string(reason.Unavailable)}},
		{name: "open client, closed route", authz: deadOpen, opts: authz.MiddlewareOptions{FailModeFor: adminClosed}, path: "/admin/users", auth: "Bearer " + viewer, status: 503,
			deny: &authz.DenyBody{Reason: string(reason.Unavailable)}},
		{name: "open client, other route", authz: deadOpen, opts: authz.MiddlewareOptions{FailModeFor: adminClosed}, path: "/profile", auth: "Bearer " + viewer, status: 200,
			user: &authz.User{Subject: "anonymous", Reason: reason.FailOpen}},
		{name: "closed client, open middleware", authz: deadClosed, opts: authz.MiddlewareOptions{FailMode: authz.FailOpen}, path: "/profile", auth: "Bearer " + viewer, status: 200,
			user: &authz.User{Subject: "anonymous", Reason: reason.FailOpen}},
		{name: "unknown fail mode is closed", authz: deadOpen, opts: authz.MiddlewareOptions{FailMode: "sometimes"}, path: "/profile", auth: "Bearer " + viewer, status: 503,
			deny: &authz.DenyBody{Reason: string(reason.Unavailable)}},
		{name: "anonymous allowed without token", authz: viaSidecarClosed, opts: authz.MiddlewareOptions{AllowAnonymous: true}, path: "/public", status: 200,
			user: &authz.User{Subject: "anonymous", Reason: reason.TokenMissing}},
		{name: "anonymous allowed, invalid token still refused", authz: viaSidecarClosed, opts: authz.MiddlewareOptions{AllowAnonymous: true}, path: "/public", auth: "Bearer " + expired, status: 401,
			deny: &authz.DenyBody{Reason: string(reason.TokenExpired)}, challenge: `Bearer error="invalid_token", error_description="token-expired"`},
		{name: "development mode", authz: server.Local(servertest.NewEngine(t, nil, nil)), path: "/profile", auth: "Bearer whatever", status: 200,
			user: &authz.User{Subject: "anonymous", TenantID: tenant, Reason: reason.DevAnonymous}},
		{name: "keys unavailable", authz: server.Local(noKeys), path: "/profile", auth: "Bearer " + viewer, status: 503,
			deny: &authz.DenyBody{Reason: string(reason.JWKSUnavailable)}},
		{name: "engine cannot decide, closed", authz: server.Local(conflictClosed), opts: authz.MiddlewareOptions{Action: routeAction, Resource: func(*http.Request) authz.Resource { return authz.Resource{ID: "conflict"} }},
			path: "/orders", auth: "Bearer " + viewer, status: 503, deny: &authz.DenyBody{Reason: string(reason.PolicyError)}},
		{name: "engine cannot decide, open", authz: server.Local(conflictOpen), opts: authz.MiddlewareOptions{Action: routeAction, Resource: func(*http.Request) authz.Resource { return authz.Resource{ID: "conflict"} }},
			path: "/orders", auth: "Bearer x", status: 503, deny: &authz.DenyBody{Reason: string(reason.PolicyError)}},
		{name: "sidecar cannot decide, open", authz: newClient(t, servertest.ServeGRPC(t, servertest.NewServer(t, conflictClosed)), authz.FailOpen),
			opts: authz.MiddlewareOptions{Action: routeAction, Resource: func(*http.Request) authz.Resource { return authz.Resource{ID: "conflict"} }},
			path: "/orders", auth: "Bearer " + viewer, status: 503, deny: &authz.DenyBody{Reason: string(reason.PolicyError)}},
		{name: "sidecar cannot decide, closed", authz: newClient(t, servertest.ServeGRPC(t, servertest.NewServer(t, conflictClosed)), authz.FailClosed),
			opts: authz.MiddlewareOptions{Action: routeAction, Resource: func(*http.Request) authz.Resource { return authz.Resource{ID: "conflict"} }},
			path: "/orders", auth: "Bearer " + viewer, status: 503, deny: &authz.DenyBody{Reason: string(reason.PolicyError)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := servertest.Protect(t, tt.authz, tt.opts).URL
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			header := map[string]string{}
			if tt.auth != "" {
				header["Authorization"] = tt.auth
			}
			got := servertest.Post(t, method, base+tt.path, "", header)
			if got.Status != tt.status {
				t.Fatalf("status %d, want %d; body %s", got.Status, tt.status, got.Body)
			}
			if c := got.Header.Get("WWW-Authenticate"); c != tt.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", c, tt.challenge)
			}
			if strings.Contains(string(got.Body), viewer) || strings.Contains(string(got.Body), expired) {
				t.Error("the response quotes the token")
			}
			if tt.user != nil {
				var u authz.User
				if err := json.Unmarshal(got.Body, &u); err != nil {
					t.Fatalf("body %s: %v", got.Body, err)
				}
				checkUser(t, *tt.user, u)
				return
			}
			var d authz.DenyBody
			if err := json.Unmarshal(got.Body, &d); err != nil {
				t.Fatalf("body %s: %v", got.Body, err)
			}
			want := *tt.deny
			if want.DenyReasons == nil {
				want.DenyReasons = []string{}
			}
			if d.Reason == string(reason.PolicyDeny) && d.DecisionID == "" {
				t.Error("a policy denial carries its decision id")
			}
			d.DecisionID = ""
			if diff := cmp.Diff(want, d); diff != "" {
				t.Errorf("deny body (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("rate limited", func(t *testing.T) {
		base := servertest.Protect(t, viaSidecarClosed, authz.MiddlewareOptions{Action: routeAction}).URL
		header := map[string]string{"Authorization": "Bearer " + limited}
		servertest.Post(t, http.MethodGet, base+"/orders", "", header)
		got := servertest.Post(t, http.MethodGet, base+"/orders", "", header)
		if got.Status != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 429; body %s", got.Status, got.Body)
		}
		if s, err := strconv.Atoi(got.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Errorf("Retry-After %q", got.Header.Get("Retry-After"))
		}
	})

	t.Run("deny body", func(t *testing.T) {
		base := servertest.Protect(t, viaSidecarClosed, authz.MiddlewareOptions{Action: routeAction}).URL
		got := servertest.Post(t, http.MethodDelete, base+"/orders/o-1", "", map[string]string{"Authorization": "Bearer " + viewer})
		testkit.Golden(t, *update, filepath.Join("testdata", "middleware", "policy-deny.json"), regexp.MustCompile(`"decision_id":"[^"]+"`).ReplaceAll(got.Body, []byte(`"decision_id":"<decision-id>"`)))
	})
}

// checkUser compares the user a handler saw, requiring claims exactly when
// a token was verified.
func checkUser(t *testing.T, want, got authz.User) {
	t.Helper()
	verified := want.Reason == reason.OK || want.Reason == reason.PolicyAllow
	if verified != (got.Claims != nil) {
		t.Errorf("claims %v; token verified: %v", got.Claims, verified)
	}
	if verified && got.Claims["department"] != "sales" {
		t.Errorf("custom claim department = %v", got.Claims["department"])
	}
	if (want.Reason == reason.PolicyAllow) != (got.DecisionID != "") {
		t.Errorf("decision id %q for reason %q", got.DecisionID, want.Reason)
	}
	got.Claims, got.DecisionID = nil, ""
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("user (-want +got):\n%s", diff)
	}
}

func TestUserFrom(t *testing.T) {
	if _, ok := authz.UserFrom(t.Context()); ok {
		t.Error("a bare context has a user")
	}
	want := authz.User{Subject: "alice", Reason: reason.OK}
	got, ok := authz.UserFrom(authz.ContextWithUser(t.Context(), want))
	if !ok || !cmp.Equal(want, got) {
		t.Errorf("UserFrom = %+v, %v", got, ok)
	}
}

func TestMiddlewareClaimsAreTheRequestsOwn(t *testing.T) {
	p := servertest.NewIDP(t)
	tok := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	a := server.Local(servertest.NewEngine(t, p, nil))
	h := authz.Middleware(a, authz.MiddlewareOptions{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := authz.UserFrom(r.Context())
		u.Claims["department"] = "changed"
		u.Claims["clearance"].(map[string]any)["level"] = "changed"
	}))
	for i := 0; i < 2; i++ {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	d, err := a.ValidateToken(t.Context(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if d.Claims["department"] != "sales" || d.Claims["clearance"].(map[string]any)["level"] == "changed" {
		t.Errorf("a handler changed the engine's cached claims: %v", d.Claims)
	}
}

func TestMiddlewareNilAuthorizerPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Middleware(nil) did not panic")
		}
	}()
	authz.Middleware(nil, authz.MiddlewareOptions{})
}

// A decision service that answers but will not decide (a decision log
// with overflow = "deny" whose spool is full refuses every decision with
// decision-log-unavailable) has not gone away: the middleware refuses
// the request 503 in both fail modes, through gRPC, the HTTP API and
// in-process, and never lets it through as a fail-open anonymous user.
func TestMiddlewareRefusedDecisionIsNoOutage(t *testing.T) {
	p := servertest.NewIDP(t)
	eng := servertest.NewEngine(t, p, func(c *config.Config) {
		c.SDK.FailMode = config.FailOpen
		c.DecisionLog = config.DecisionLog{Sink: config.DecisionLogHTTP, URL: "http://" + testkit.DeadAddr(t) + "/v1",
			SpoolDir: t.TempDir(), Overflow: config.DecisionLogDeny, SpoolMaxBytes: 1 << 20,
			FlushInterval: config.Duration{Duration: time.Hour}}
	})
	srv := servertest.NewServer(t, eng)
	viewer := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	// Each record holds the 12 KB attribute: fewer than 100 fill the spool.
	opts := authz.MiddlewareOptions{Action: routeAction, Resource: func(*http.Request) authz.Resource {
		return authz.Resource{Attributes: map[string]any{"pad": strings.Repeat("x", 12000)}}
	}}
	header := map[string]string{"Authorization": "Bearer " + viewer}
	grpcOpen := servertest.Protect(t, newClient(t, servertest.ServeGRPC(t, srv), authz.FailOpen), opts).URL
	filled := false
	for n := 0; n < 2000 && !filled; n++ {
		got := servertest.Post(t, http.MethodGet, grpcOpen+"/orders/o-1", "", header)
		if got.Status != http.StatusOK || !strings.Contains(string(got.Body), string(reason.PolicyAllow)) {
			filled = true
		}
	}
	if !filled {
		t.Fatal("2000 decisions of 12 KB records answered with a spool of 1 MiB")
	}
	for _, tc := range []struct {
		name string
		a    authz.Authorizer
	}{
		{"gRPC, fail open", newClient(t, servertest.ServeGRPC(t, srv), authz.FailOpen)},
		{"gRPC, fail closed", newClient(t, servertest.ServeGRPC(t, srv), authz.FailClosed)},
		{"HTTP API, fail open", newClient(t, servertest.ServeHTTP(t, srv), authz.FailOpen)},
		{"HTTP API, fail closed", newClient(t, servertest.ServeHTTP(t, srv), authz.FailClosed)},
		{"in-process, engine fail open", server.Local(eng)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{"", authz.FailOpen} {
				o := opts
				o.FailMode = mode
				got := servertest.Post(t, http.MethodGet, servertest.Protect(t, tc.a, o).URL+"/orders/o-1", "", header)
				var d authz.DenyBody
				if err := json.Unmarshal(got.Body, &d); err != nil || got.Status != http.StatusServiceUnavailable ||
					d.Reason != string(reason.DecisionLogUnavailable) {
					t.Errorf("middleware fail mode %q: status %d, body %s; want 503 decision-log-unavailable", mode, got.Status, got.Body)
				}
			}
		})
	}
}

// The headers of a request reach the policy (IncludeRequest) as the
// sidecar's proxy check gives them: never the x-svc-* headers the
// sidecar owns, which a client's request can only have forged, and the
// forwarding headers (X-Forwarded-For, Forwarded, X-Real-IP), which any
// client can send, only with TrustForwardedFor. A policy that reads them
// behind the proxy is not fooled through the middleware.
func TestMiddlewareRequestHeadersAsTheProxyCheckGivesThem(t *testing.T) {
	p := servertest.NewIDP(t)
	eng := servertest.NewEngine(t, p, func(c *config.Config) { c.Policy.Dir = "testdata/request-headers" })
	viewer := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	authorizers := []struct {
		name string
		a    authz.Authorizer
	}{
		{"gRPC", newClient(t, servertest.ServeGRPC(t, servertest.NewServer(t, eng)), authz.FailClosed)},
		{"HTTP API", newClient(t, servertest.ServeHTTP(t, servertest.NewServer(t, eng)), authz.FailClosed)},
		{"in-process", server.Local(eng)},
	}
	forged := []map[string]string{
		{"X-Svc-User-Id": "root"},
		{"X-Svc-Roles": "admin"},
		{"X-Forwarded-For": "10.0.0.7"},
		{"X-Real-Ip": "10.0.0.7"},
		{"Forwarded": "for=10.0.0.7"},
	}
	action := func(*http.Request) string { return "orders:read" }
	for _, az := range authorizers {
		t.Run(az.name, func(t *testing.T) {
			plain := servertest.Protect(t, az.a, authz.MiddlewareOptions{Action: action, IncludeRequest: true}).URL
			trusting := servertest.Protect(t, az.a, authz.MiddlewareOptions{Action: action, IncludeRequest: true, TrustForwardedFor: true}).URL
			call := func(base string, h map[string]string) int {
				header := map[string]string{"Authorization": "Bearer " + viewer}
				for k, v := range h {
					header[k] = v
				}
				return servertest.Post(t, http.MethodGet, base+"/orders/1", "", header).Status
			}
			if got := call(plain, map[string]string{"X-Team": "ops"}); got != http.StatusOK {
				t.Fatalf("a header of the application's own: status %d, want 200", got)
			}
			for _, h := range forged {
				if got := call(plain, h); got != http.StatusForbidden {
					t.Errorf("%v: status %d, want 403: the policy saw a header the proxy check never gives it", h, got)
				}
			}
			for i, h := range forged {
				want := http.StatusOK
				if i < 2 {
					want = http.StatusForbidden // x-svc-*: never
				}
				if got := call(trusting, h); got != want {
					t.Errorf("TrustForwardedFor, %v: status %d, want %d", h, got, want)
				}
			}
		})
	}
}

// A method override header that names another method than the request's
// is refused (400 input-invalid), as the sidecar's proxy check refuses
// it: a handler that honors it (Rails-, Express- or Spring-style) would
// serve "GET /orders/1" with "X-HTTP-Method-Override: DELETE" as the
// DELETE while the policy judged the read.
func TestMiddlewareMethodOverrideNamesTheMethod(t *testing.T) {
	p := servertest.NewIDP(t)
	eng := servertest.NewEngine(t, p, nil)
	viewer := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	// The application behind the middleware serves the overriding method.
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, h := range []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"} {
			if v := r.Header.Get(h); v != "" {
				r.Method = strings.ToUpper(v)
			}
		}
		_, _ = w.Write([]byte(r.Method))
	})
	for _, az := range []struct {
		name string
		a    authz.Authorizer
	}{
		{"gRPC", newClient(t, servertest.ServeGRPC(t, servertest.NewServer(t, eng)), authz.FailClosed)},
		{"in-process", server.Local(eng)},
	} {
		t.Run(az.name, func(t *testing.T) {
			h := authz.Middleware(az.a, authz.MiddlewareOptions{Action: routeAction, Logger: servertest.QuietLogger()})(served)
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			for _, tc := range []struct {
				method, header, value string
				status                int
			}{
				{http.MethodGet, "", "", 200},
				{http.MethodGet, "X-HTTP-Method-Override", "GET", 200},
				{http.MethodGet, "X-HTTP-Method-Override", " get ", 200},
				{http.MethodGet, "X-HTTP-Method-Override", "DELETE", 400},
				{http.MethodGet, "X-HTTP-Method", "DELETE", 400},
				{http.MethodGet, "X-Method-Override", "delete", 400},
				{http.MethodDelete, "", "", 403},
				{http.MethodDelete, "X-HTTP-Method-Override", "GET", 400},
			} {
				header := map[string]string{"Authorization": "Bearer " + viewer}
				if tc.header != "" {
					header[tc.header] = tc.value
				}
				got := servertest.Post(t, tc.method, srv.URL+"/orders/1", "", header)
				if got.Status != tc.status {
					t.Errorf("%s with %s %q: status %d (%s), want %d", tc.method, tc.header, tc.value, got.Status, got.Body, tc.status)
					continue
				}
				if tc.status == 400 {
					var d authz.DenyBody
					if err := json.Unmarshal(got.Body, &d); err != nil || d.Reason != string(reason.InputInvalid) {
						t.Errorf("%s with %s %q: body %s, want input-invalid", tc.method, tc.header, tc.value, got.Body)
					}
				}
			}
		})
	}
}
