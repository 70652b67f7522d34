package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// TestEnvoyCheckAllows drives envoy.service.auth.v3.Authorization/Check
// with tokens the sidecar must accept and requests the default policy
// allows, and checks the headers Envoy would pass upstream.
func TestEnvoyCheckAllows(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)

	withinSkew := harness.Claims("alice", "acme", "viewer")
	withinSkew["exp"] = time.Now().Add(-10 * time.Second).Unix()

	tests := []struct {
		name, method, path string
		token              string
		ext                map[string]string
		wantUser, wantRole string
	}{
		{"RS256 viewer reads", "GET", "/orders/42", k.token(t, "alice", "acme", "viewer"), nil, "alice", "viewer"},
		{"PS256 viewer reads", "GET", "/orders/42?expand=items", k.ps.Token(t, harness.Claims("bob", "acme", "viewer")), nil, "bob", "viewer"},
		{"ES256 viewer reads", "HEAD", "/orders", k.ec.Token(t, harness.Claims("carol", "acme", "viewer")), nil, "carol", "viewer"},
		{"editor creates with POST", "POST", "/orders", k.token(t, "dave", "acme", "editor"), nil, "dave", "editor"},
		{"editor updates with PATCH", "PATCH", "/orders/42", k.token(t, "dave", "acme", "editor"), nil, "dave", "editor"},
		{"billing deletes invoices", "DELETE", "/invoices/7", k.token(t, "erin", "acme", "billing"), nil, "erin", "billing"},
		{"expired within the 30s clock skew", "GET", "/orders/42", k.rsa.Token(t, withinSkew), nil, "alice", "viewer"},
		{"svc.action overrides the method", "DELETE", "/orders/42", k.token(t, "alice", "acme", "viewer"),
			map[string]string{"svc.action": "orders:read"}, "alice", "viewer"},
		{"svc.action of a plan-gated action the plan includes", "GET", "/hooks", k.token(t, "dave", "acme", "editor"),
			map[string]string{"svc.action": "webhooks:create"}, "dave", "editor"},
		{"svc.resource chooses the resource", "GET", "/anything/7", k.token(t, "erin", "acme", "billing"),
			map[string]string{"svc.resource": "invoices", "svc.resource_id": "7"}, "erin", "billing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := envoyCheck(t, s, tc.method, tc.path, tc.token, tc.ext)
			if r.status != http.StatusOK {
				t.Fatalf("Check: status %d, want 200 (OK); body %s", r.status, r.body)
			}
			if got := r.headers["x-svc-user-id"]; got != tc.wantUser {
				t.Errorf("x-svc-user-id = %q, want %q", got, tc.wantUser)
			}
			if got := r.headers["x-svc-tenant-id"]; got != "acme" {
				t.Errorf("x-svc-tenant-id = %q, want acme", got)
			}
			if got := r.headers["x-svc-roles"]; !strings.Contains(got, tc.wantRole) {
				t.Errorf("x-svc-roles = %q, want it to hold %q", got, tc.wantRole)
			}
			id := r.headers["x-svc-decision-id"]
			if id == "" {
				t.Fatalf("x-svc-decision-id missing; headers %v", r.headers)
			}
			if !structHolds(r.metadata.AsMap(), id) {
				t.Errorf("dynamic metadata %v does not carry the decision id %q", r.metadata.AsMap(), id)
			}
		})
	}
}

// structHolds reports whether v (a decoded JSON value) holds want as a
// string anywhere.
func structHolds(v any, want string) bool {
	switch x := v.(type) {
	case string:
		return x == want
	case map[string]any:
		for _, e := range x {
			if structHolds(e, want) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if structHolds(e, want) {
				return true
			}
		}
	}
	return false
}

// TestEnvoyCheckInvalidToken checks that every kind of invalid token is
// denied with 401, a Bearer challenge and the stable reason, and that
// ValidateToken reports the same reason.
func TestEnvoyCheckInvalidToken(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)

	now := time.Now()
	with := func(edit func(c map[string]any)) map[string]any {
		c := harness.Claims("alice", "acme", "viewer")
		edit(c)
		return c
	}
	valid := k.token(t, "alice", "acme", "viewer")
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + harness.Segment(t, with(func(c map[string]any) { c["roles"] = []string{"admin"} })) + "." + parts[2]

	tests := []struct {
		name   string
		token  string // "" sends no Authorization header
		header string // raw Authorization header instead of a bearer token
		want   string
	}{
		{"missing", "", "", "token-missing"},
		{"basic scheme", "", "Basic YWxpY2U6c2VjcmV0", "token-missing"},
		{"expired", k.rsa.Token(t, with(func(c map[string]any) {
			c["iat"] = now.Add(-time.Hour).Unix()
			c["exp"] = now.Add(-10 * time.Minute).Unix()
		})), "", "token-expired"},
		{"not yet valid", k.rsa.Token(t, with(func(c map[string]any) { c["nbf"] = now.Add(10 * time.Minute).Unix() })), "", "token-not-yet-valid"},
		{"issued in the future", k.rsa.Token(t, with(func(c map[string]any) { c["iat"] = now.Add(10 * time.Minute).Unix() })), "", "token-issued-in-future"},
		{"no exp", k.rsa.Token(t, with(func(c map[string]any) { delete(c, "exp") })), "", "token-malformed"},
		{"bad signature", k.stranger.Token(t, harness.Claims("alice", "acme", "viewer")), "", "signature-invalid"},
		{"tampered claims", tampered, "", "signature-invalid"},
		{"unknown kid", k.rsa.WithKid("rsa-unknown").Token(t, harness.Claims("alice", "acme", "viewer")), "", "unknown-kid"},
		{"alg none", harness.UnsignedToken(t, map[string]any{"alg": "none", "typ": "JWT", "kid": "rsa-1"},
			harness.Claims("alice", "acme", "admin")), "", "alg-not-allowed"},
		{"HS256 with the public key as secret", harness.HS256Token(t, k.rsa.PublicPEM(t),
			map[string]any{"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, harness.Claims("alice", "acme", "admin")), "", "alg-not-allowed"},
		{"PS256 signature on an RS256 key", k.rsa.Sign(t, "PS256", nil, harness.Claims("alice", "acme", "viewer")), "", "alg-not-allowed"},
		{"1024-bit RSA key", k.weak.Token(t, harness.Claims("alice", "acme", "viewer")), "", "key-too-weak"},
		{"no tenant_id", k.rsa.Token(t, with(func(c map[string]any) { delete(c, "tenant_id") })), "", "tenant-missing"},
		{"not a JWT", "not-a-jwt", "", "token-malformed"},
		{"three garbage parts", "a.b.c", "", "token-malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			headers := map[string]string{}
			switch {
			case tc.header != "":
				headers["authorization"] = tc.header
			case tc.token != "":
				headers["authorization"] = "Bearer " + tc.token
			}
			r := envoyCheckHeaders(t, s, "GET", "/orders/42", headers, nil)
			if r.status != http.StatusUnauthorized {
				t.Fatalf("Check: status %d, want 401; body %s", r.status, r.body)
			}
			challenge := r.headers["www-authenticate"]
			if !strings.HasPrefix(challenge, "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", challenge)
			}
			if tc.want != "token-missing" && !strings.Contains(challenge, `error="invalid_token"`) {
				t.Errorf(`WWW-Authenticate = %q, want error="invalid_token"`, challenge)
			}
			if _, ok := r.headers["x-svc-user-id"]; ok {
				t.Errorf("a denied Check carries x-svc-user-id")
			}
			if d := parseDeny(t, r.body); d.Reason != tc.want {
				t.Errorf("deny body reason = %q, want %q (body %s)", d.Reason, tc.want, r.body)
			}
			if tc.header != "" {
				return
			}
			v := validate(t, s, tc.token)
			if v.GetAllowed() || v.GetReason() != tc.want {
				t.Errorf("ValidateToken = allowed %v reason %q, want false %q", v.GetAllowed(), v.GetReason(), tc.want)
			}
			if v.GetClaims() != nil {
				t.Errorf("ValidateToken of a rejected token returned claims")
			}
			if tc.token != "" && strings.Contains(v.GetMessage(), tc.token) {
				t.Errorf("ValidateToken message repeats the token")
			}
		})
	}
	// The sidecar never logs a token.
	for _, tc := range tests {
		if len(tc.token) > 20 && strings.Contains(s.Stderr.String(), tc.token) {
			t.Errorf("sidecar log holds the %q token", tc.name)
		}
	}
}

// TestEnvoyCheckPolicyDeny checks 403 denials of the default policy with
// their deny reasons, and context extensions choosing the action and the
// resource's tenant.
func TestEnvoyCheckPolicyDeny(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)

	tests := []struct {
		name, method, path string
		token              string
		ext                map[string]string
		want               []string // each must be among the deny reasons
	}{
		{"token of another tenant", "GET", "/orders/42", k.token(t, "mallory", "globex", "admin"), nil,
			[]string{"tenant-mismatch"}},
		{"viewer deletes", "DELETE", "/orders/42", k.token(t, "alice", "acme", "viewer"), nil,
			[]string{"role-forbidden: viewer cannot orders:delete"}},
		{"viewer updates with PUT", "PUT", "/orders/42", k.token(t, "alice", "acme", "viewer"), nil,
			[]string{"role-forbidden: viewer cannot orders:update"}},
		{"first path segment is the resource", "GET", "/orders/7", k.token(t, "erin", "acme", "billing"), nil,
			[]string{"role-forbidden: billing cannot orders:read"}},
		{"no role", "GET", "/orders/42", k.token(t, "nobody", "acme"), nil, []string{"no-role"}},
		{"svc.action overrides the method", "GET", "/orders/42", k.token(t, "alice", "acme", "viewer"),
			map[string]string{"svc.action": "orders:delete"}, []string{"role-forbidden: viewer cannot orders:delete"}},
		{"plan-gated action", "POST", "/reports/export", k.token(t, "root", "acme", "admin"),
			map[string]string{"svc.action": "reports:export"}, []string{"plan-required: enterprise"}},
		{"svc.tenant names another tenant's resource", "GET", "/orders/42", k.token(t, "alice", "acme", "viewer"),
			map[string]string{"svc.tenant": "globex"}, []string{"tenant-mismatch"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := envoyCheck(t, s, tc.method, tc.path, tc.token, tc.ext)
			if r.status != http.StatusForbidden {
				t.Fatalf("Check: status %d, want 403; body %s", r.status, r.body)
			}
			d := parseDeny(t, r.body)
			if d.Reason != "policy-deny" {
				t.Errorf("reason = %q, want policy-deny", d.Reason)
			}
			if d.DecisionID == "" {
				t.Errorf("deny body has no decision_id: %s", r.body)
			}
			for _, w := range tc.want {
				if !hasReason(d.DenyReasons, w) {
					t.Errorf("deny_reasons = %q, want %q among them", d.DenyReasons, w)
				}
			}
			if _, ok := r.headers["x-svc-user-id"]; ok {
				t.Errorf("a denied Check carries x-svc-user-id")
			}
		})
	}
}

// TestHTTPCheckEnvoyPath drives the HTTP check mode of Envoy's
// http_service: /check/envoy/<original path>.
func TestHTTPCheckEnvoyPath(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)

	tests := []struct {
		name, method, path, token string
		want                      int
		wantReason                string
	}{
		{"viewer reads", "GET", "/orders/42", k.token(t, "alice", "acme", "viewer"), http.StatusOK, ""},
		{"viewer deletes", "DELETE", "/orders/42", k.token(t, "alice", "acme", "viewer"), http.StatusForbidden, "role-forbidden"},
		{"other tenant", "GET", "/orders/42", k.token(t, "mallory", "globex", "admin"), http.StatusForbidden, "tenant-mismatch"},
		{"missing token", "GET", "/orders/42", "", http.StatusUnauthorized, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := harness.Send(t, tc.method, s.URL("/check/envoy"+tc.path), "", map[string]string{"Authorization": harness.Bearer(tc.token)})
			if status != tc.want {
				t.Fatalf("got %s, want status %d", harness.Describe(status, h, body), tc.want)
			}
			switch status {
			case http.StatusOK:
				if h.Get("X-Svc-User-Id") != "alice" || h.Get("X-Svc-Tenant-Id") != "acme" || h.Get("X-Svc-Decision-Id") == "" {
					t.Errorf("allow headers: %v", h)
				}
			case http.StatusUnauthorized:
				if !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("WWW-Authenticate = %q", h.Get("WWW-Authenticate"))
				}
			case http.StatusForbidden:
				if d := parseDeny(t, string(body)); !hasReason(d.DenyReasons, tc.wantReason) {
					t.Errorf("deny_reasons = %q, want %q", d.DenyReasons, tc.wantReason)
				}
			}
		})
	}
}

// TestProxies puts nginx (auth_request) and Caddy (forward_auth) in front
// of an echoing upstream, both asking the sidecar's /check endpoint, and
// checks what reaches the upstream and what the client gets back.
func TestProxies(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)

	proxies := []struct {
		name  string
		start func(testing.TB, string, string) *harness.Proxy
		// denyBody: the proxy hands the sidecar's JSON deny body to the
		// client (Caddy does; nginx answers with its own error page).
		denyBody bool
	}{
		{"nginx auth_request", harness.StartNginx, false},
		{"caddy forward_auth", harness.StartCaddy, true},
	}

	viewer := k.token(t, "alice", "acme", "viewer")
	expiredClaims := harness.Claims("alice", "acme", "viewer")
	expiredClaims["exp"] = time.Now().Add(-10 * time.Minute).Unix()
	expired := k.rsa.Token(t, expiredClaims)
	foreign := k.token(t, "mallory", "globex", "admin")
	spoofed := map[string]string{
		"X-Svc-User-Id":     "root",
		"X-Svc-Tenant-Id":   "globex",
		"X-Svc-Roles":       "admin",
		"X-Svc-Decision-Id": "forged",
	}

	tests := []struct {
		name, method, path, token string
		headers                   map[string]string
		want                      int
		wantReason                string // for 403: a deny reason; for 401: the WWW-Authenticate error
	}{
		{"viewer reads", "GET", "/orders/42?expand=items", viewer, nil, http.StatusOK, ""},
		{"spoofed x-svc headers never reach the upstream", "GET", "/orders/42", viewer, spoofed, http.StatusOK, ""},
		{"missing token", "GET", "/orders/42", "", nil, http.StatusUnauthorized, ""},
		{"missing token with spoofed identity", "GET", "/orders/42", "", spoofed, http.StatusUnauthorized, ""},
		{"expired token", "GET", "/orders/42", expired, nil, http.StatusUnauthorized, `error="invalid_token"`},
		{"garbage token", "GET", "/orders/42", "garbage", nil, http.StatusUnauthorized, `error="invalid_token"`},
		{"another tenant", "GET", "/orders/42", foreign, nil, http.StatusForbidden, "tenant-mismatch"},
		{"method reaches the check", "DELETE", "/orders/42", viewer, nil, http.StatusForbidden, "role-forbidden"},
		{"path reaches the check", "GET", "/orders/42", k.token(t, "erin", "acme", "billing"), nil, http.StatusForbidden, "role-forbidden"},
	}

	for _, px := range proxies {
		t.Run(px.name, func(t *testing.T) {
			t.Parallel()
			up := harness.StartUpstream(t)
			p := px.start(t, s.HTTPAddr, up.Addr)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					req, err := http.NewRequest(tc.method, p.URL+tc.path, nil)
					if err != nil {
						t.Fatal(err)
					}
					if tc.token != "" {
						req.Header.Set("Authorization", "Bearer "+tc.token)
					}
					for h, v := range tc.headers {
						req.Header.Set(h, v)
					}
					hits := up.Hits()
					status, h, body := harness.Do(t, req)
					if status != tc.want {
						t.Fatalf("got %s; want status %d", harness.Describe(status, h, body), tc.want)
					}
					if status != http.StatusOK {
						if up.Hits() != hits {
							t.Errorf("a refused request reached the upstream")
						}
						if h.Get("X-Upstream") != "" {
							t.Errorf("the refusal came from the upstream")
						}
					}
					switch status {
					case http.StatusOK:
						checkUpstreamSaw(t, harness.ParseEcho(t, body), tc.method, tc.path)
					case http.StatusUnauthorized:
						challenge := h.Get("WWW-Authenticate")
						if !strings.HasPrefix(challenge, "Bearer") || !strings.Contains(challenge, tc.wantReason) {
							t.Errorf("WWW-Authenticate = %q, want a Bearer challenge with %q", challenge, tc.wantReason)
						}
					case http.StatusForbidden:
						if px.denyBody {
							if d := parseDeny(t, string(body)); !hasReason(d.DenyReasons, tc.wantReason) {
								t.Errorf("deny_reasons = %q, want %q", d.DenyReasons, tc.wantReason)
							}
						}
					}
				})
			}
		})
	}
}

// checkUpstreamSaw asserts that the upstream received the request with the
// sidecar's identity headers, once each, and nothing the client forged.
func checkUpstreamSaw(t *testing.T, e harness.Echo, method, path string) {
	t.Helper()
	if e.Method != method || e.URI != path {
		t.Errorf("upstream saw %s %s, want %s %s", e.Method, e.URI, method, path)
	}
	want := map[string]string{"X-Svc-User-Id": "alice", "X-Svc-Tenant-Id": "acme", "X-Svc-Roles": "viewer"}
	for name, v := range want {
		if got := e.Header(name); len(got) != 1 || got[0] != v {
			t.Errorf("upstream saw %s = %q, want exactly [%q]", name, got, v)
		}
	}
	if got := e.Header("X-Svc-Decision-Id"); len(got) != 1 || got[0] == "" || got[0] == "forged" {
		t.Errorf("upstream saw X-Svc-Decision-Id = %q, want the sidecar's decision id only", got)
	}
	if got := e.Header("Authorization"); len(got) != 1 {
		t.Errorf("upstream saw Authorization %d times, want the client's header passed once", len(got))
	}
}
