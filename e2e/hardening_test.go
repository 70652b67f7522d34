package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

// TestTokenGatesOfTheBinary attacks the token checks of a running sidecar
// configured with sdk.accepted_tenants and jwt.allowed_typ, through gRPC
// ValidateToken and POST /v1/validate-token alike: other tenants, typ
// variations and algorithm confusion.
func TestTokenGatesOfTheBinary(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, map[string]string{
		"SVC_ACCEPTED_TENANTS": "globex",
		"SVC_JWT_ALLOWED_TYP":  "at+jwt",
	})
	at := func(tenant string, typ any) string {
		return k.rsa.Sign(t, "RS256", map[string]any{"typ": typ}, harness.Claims("u-1", tenant, "admin"))
	}
	pub := k.rsa.PublicPEM(t)
	tests := []struct {
		name, token, want string
	}{
		{"deployment tenant, at+jwt", at("acme", "at+jwt"), "ok"},
		{"accepted tenant", at("globex", "at+jwt"), "ok"},
		{"media type form, other case", at("acme", "application/AT+JWT"), "ok"},
		{"tenant not served", at("initech", "at+jwt"), "tenant-mismatch"},
		{"tenant differs in case", at("ACME", "at+jwt"), "tenant-mismatch"},
		{"ID token (typ JWT)", at("acme", "JWT"), "typ-not-allowed"},
		{"typ missing", at("acme", nil), "typ-not-allowed"},
		{"typ not a string", at("acme", []any{"at+jwt"}), "token-malformed"},
		{"alg none", harness.UnsignedToken(t, map[string]any{"alg": "none", "typ": "at+jwt", "kid": k.rsa.Kid}, harness.Claims("u-1", "acme", "admin")), "alg-not-allowed"},
		{"HS256 keyed with the RSA public key", harness.HS256Token(t, pub, map[string]any{"alg": "HS256", "typ": "at+jwt", "kid": k.rsa.Kid}, harness.Claims("u-1", "acme", "admin")), "alg-not-allowed"},
		{"kid of another RSA key, which is PS256 only", k.rsa.Sign(t, "RS256", map[string]any{"typ": "at+jwt", "kid": k.ps.Kid}, harness.Claims("u-1", "acme", "admin")), "alg-not-allowed"},
		{"kid of another RSA key, PS256", k.rsa.Sign(t, "PS256", map[string]any{"typ": "at+jwt", "kid": k.ps.Kid}, harness.Claims("u-1", "acme", "admin")), "signature-invalid"},
		{"kid of the EC key", k.rsa.Sign(t, "RS256", map[string]any{"typ": "at+jwt", "kid": k.ec.Kid}, harness.Claims("u-1", "acme", "admin")), "alg-not-allowed"},
		{"jku naming the attacker's keys is ignored", k.stranger.Sign(t, "RS256", map[string]any{"typ": "at+jwt", "jku": k.jwks.URL, "x5u": k.jwks.URL}, harness.Claims("u-1", "acme", "admin")), "signature-invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := validate(t, s, tt.token)
			if v.GetReason() != tt.want || v.GetAllowed() != (tt.want == "ok") {
				t.Errorf("gRPC ValidateToken: allowed %v reason %q (%s), want %s", v.GetAllowed(), v.GetReason(), v.GetMessage(), tt.want)
			}
			status, h, body := harness.Send(t, http.MethodPost, s.URL("/v1/validate-token"), "{}", map[string]string{"Authorization": harness.Bearer(tt.token)})
			var got struct {
				Allowed bool   `json:"allowed"`
				Reason  string `json:"reason"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("POST /v1/validate-token: %s", harness.Describe(status, h, body))
			}
			if got.Reason != tt.want || got.Allowed != (tt.want == "ok") {
				t.Errorf("POST /v1/validate-token: %s, want reason %s", harness.Describe(status, h, body), tt.want)
			}
		})
	}
}

// TestCheckPathsAndMethodsOfTheBinary sends the path and method tricks to a
// running sidecar's Envoy Check and /check (auto mode).
func TestCheckPathsAndMethodsOfTheBinary(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	viewer := k.token(t, "u-viewer", "acme", "viewer")

	for _, path := range []string{
		"/orders/..;/admin/users", "/orders%2f..%2fadmin", "/orders/..%5Cadmin", "/orders/%2e%2e%3b/admin",
		"/admin%00/../orders/1", "/orders/1%0d%0aX-Svc-Roles:%20admin",
	} {
		t.Run("envoy "+path, func(t *testing.T) {
			r := envoyCheck(t, s, "GET", path, viewer, nil)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, "path-invalid") {
				t.Errorf("status %d body %s, want 400 path-invalid", r.status, r.body)
			}
		})
	}

	t.Run("envoy method override naming another method", func(t *testing.T) {
		r := envoyCheckHeaders(t, s, "POST", "/orders/1", map[string]string{
			"authorization": "Bearer " + viewer, "x-http-method-override": "DELETE",
		}, nil)
		if r.status != http.StatusBadRequest || !strings.Contains(r.body, "input-invalid") {
			t.Errorf("status %d body %s, want 400 input-invalid", r.status, r.body)
		}
	})

	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    int
	}{
		{"caddy: viewer may read", map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "GET"}, http.StatusOK},
		{"caddy: viewer may not delete", map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE"}, http.StatusForbidden},
		// Caddy passes a client's X-Original-URI on: auto takes the check
		// for nginx's, whose method only X_Svc_Method names.
		{"caddy passing on a client's X-Original-URI: refused, never the check's GET", map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE", "X-Original-URI": "/orders/1"}, http.StatusBadRequest},
		{"nginx with a client's X-Forwarded-Uri: still nginx's DELETE", map[string]string{"X-Original-URI": "/orders/1", "X_Svc_Method": "DELETE", "X-Forwarded-Uri": "/orders/1"}, http.StatusForbidden},
		{"caddy: method override header refused", map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "POST", "X-Http-Method-Override": "DELETE"}, http.StatusBadRequest},
		// Two method headers, one of them a client's: they must agree.
		{"nginx: a client's X-Forwarded-Method naming another method is refused", map[string]string{"X-Original-URI": "/orders/1", "X_Svc_Method": "DELETE", "X-Forwarded-Method": "GET"}, http.StatusBadRequest},
		{"caddy: a client's X_Svc_Method naming another method is refused", map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE", "X_Svc_Method": "GET"}, http.StatusBadRequest},
		// nginx's own auth_request example sets X-Original-URI only; the
		// check request's GET is not the method, nor is a client's
		// X-Original-Method, so the viewer's DELETE behind it must not
		// pass as a read.
		{"nginx without X_Svc_Method: refused, not judged as the GET", map[string]string{"X-Original-URI": "/orders/1"}, http.StatusBadRequest},
		{"nginx: a client's X-Original-Method is not read", map[string]string{"X-Original-URI": "/orders/1", "X-Original-Method": "GET"}, http.StatusBadRequest},
		{"caddy without X-Forwarded-Method: refused", map[string]string{"X-Forwarded-Uri": "/orders/1"}, http.StatusBadRequest},
		{"caddy: a client's X-Original-Method is not read", map[string]string{"X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "DELETE", "X-Original-Method": "GET"}, http.StatusForbidden},
	} {
		t.Run("check "+tc.name, func(t *testing.T) {
			if got, _ := proxyCheck(t, s, viewer, tc.headers); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
		})
	}
}

// TestClaimsReachCallersIntact sends a token whose roles hold the
// separators of x-svc-roles and whose user id is past 2^53 through the
// running sidecar: roles arrive as their items, the id with every digit.
func TestClaimsReachCallersIntact(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	claims := harness.Claims("u-1", "acme", "viewer", "x,admin", `a"b`)
	claims["uid"] = json.Number("9007199254740993")
	tok := k.rsa.Token(t, claims)
	const wantRoles = "viewer,x%2Cadmin,a%22b"

	t.Run("envoy x-svc-roles", func(t *testing.T) {
		r := envoyCheck(t, s, "GET", "/orders/1", tok, nil)
		if r.status != http.StatusOK || r.headers["x-svc-roles"] != wantRoles {
			t.Fatalf("status %d x-svc-roles %q, want 200 %q", r.status, r.headers["x-svc-roles"], wantRoles)
		}
	})
	t.Run("check X-Svc-Roles", func(t *testing.T) {
		status, h, body := harness.Send(t, http.MethodGet, s.URL("/check"), "", map[string]string{
			"Authorization": harness.Bearer(tok), "X-Forwarded-Uri": "/orders/1", "X-Forwarded-Method": "GET"})
		if status != http.StatusOK || h.Get("X-Svc-Roles") != wantRoles {
			t.Fatalf("%s, want 200 with X-Svc-Roles %q", harness.Describe(status, h, body), wantRoles)
		}
	})
	t.Run("gRPC ValidateToken uid", func(t *testing.T) {
		if got := claim(validate(t, s, tok), "uid"); got != "9007199254740993" {
			t.Fatalf("uid = %#v, want the string 9007199254740993", got)
		}
	})
	t.Run("HTTP validate-token uid", func(t *testing.T) {
		status, h, body := harness.Send(t, http.MethodPost, s.URL("/v1/validate-token"), "{}", map[string]string{"Authorization": harness.Bearer(tok)})
		var got struct {
			Claims map[string]json.RawMessage `json:"claims"`
		}
		if err := json.Unmarshal(body, &got); err != nil || string(got.Claims["uid"]) != `"9007199254740993"` {
			t.Fatalf("%s, want claims.uid \"9007199254740993\"", harness.Describe(status, h, body))
		}
	})
}
