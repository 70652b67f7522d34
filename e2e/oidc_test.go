package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

const idpResource = "urn:svc:e2e:orders"

var idpClients = []harness.IDPClient{
	{ID: "orders-viewer", Secret: "viewer-secret-0123456789abcdef", TenantID: "acme", Roles: []string{"viewer"}, Email: "orders-viewer@acme.example"},
	{ID: "orders-editor", Secret: "editor-secret-0123456789abcdef", TenantID: "acme", Roles: []string{"editor", "billing"}},
	{ID: "globex-admin", Secret: "globex-secret-0123456789abcdef", TenantID: "globex", Roles: []string{"admin"}},
	{ID: "tenantless", Secret: "tenantless-secret-0123456789ab", Roles: []string{"admin"}},
}

// TestOIDCProviderTokens verifies access tokens issued by a real OpenID
// provider (oidc-provider, client_credentials grant with a resource
// indicator, RS256 JWTs with custom claims) through every surface of the
// sidecar, with issuer and audience checks on.
func TestOIDCProviderTokens(t *testing.T) {
	t.Parallel()
	idp := harness.StartIDP(t, idpResource, 5*time.Minute, idpClients...)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig, Env: map[string]string{
		"SVC_JWKS_URL":      idp.JWKSURL,
		"SVC_JWT_ISSUER":    idp.Issuer,
		"SVC_JWT_AUDIENCES": idpResource,
	}})
	viewer := idp.Token(t, "orders-viewer")

	t.Run("ValidateToken returns the provider's claims", func(t *testing.T) {
		v := validate(t, s, viewer)
		if !v.GetAllowed() || v.GetReason() != "ok" {
			t.Fatalf("ValidateToken = allowed %v reason %q (%s), want true ok", v.GetAllowed(), v.GetReason(), v.GetMessage())
		}
		if v.GetSubject() != "orders-viewer" || v.GetTenantId() != "acme" {
			t.Errorf("subject %q tenant %q, want orders-viewer acme", v.GetSubject(), v.GetTenantId())
		}
		if got := claim(v, "roles"); !equalJSON(got, []any{"viewer"}) {
			t.Errorf("roles claim = %v, want [viewer]", got)
		}
		for name, want := range map[string]any{
			"email": "orders-viewer@acme.example", "iss": idp.Issuer, "aud": idpResource, "client_id": "orders-viewer",
		} {
			if got := claim(v, name); !equalJSON(got, want) {
				t.Errorf("claim %s = %v, want %v", name, got, want)
			}
		}
	})

	t.Run("Envoy Check allows with the x-svc headers", func(t *testing.T) {
		r := envoyCheck(t, s, "GET", "/orders/1", viewer, nil)
		if r.status != http.StatusOK {
			t.Fatalf("status %d, want 200; body %s", r.status, r.body)
		}
		if r.headers["x-svc-user-id"] != "orders-viewer" || r.headers["x-svc-tenant-id"] != "acme" ||
			r.headers["x-svc-roles"] != "viewer" || r.headers["x-svc-decision-id"] == "" {
			t.Errorf("headers = %v", r.headers)
		}
	})

	t.Run("all roles of the token count", func(t *testing.T) {
		r := envoyCheck(t, s, "DELETE", "/invoices/9", idp.Token(t, "orders-editor"), nil)
		if r.status != http.StatusOK {
			t.Fatalf("editor+billing DELETE /invoices: status %d, want 200; body %s", r.status, r.body)
		}
		if roles := splitRoles(r.headers["x-svc-roles"]); !slices.Contains(roles, "billing") || !slices.Contains(roles, "editor") {
			t.Errorf("x-svc-roles = %q, want editor and billing", r.headers["x-svc-roles"])
		}
	})

	t.Run("another tenant's token is denied 403", func(t *testing.T) {
		r := envoyCheck(t, s, "GET", "/orders/1", idp.Token(t, "globex-admin"), nil)
		if r.status != http.StatusForbidden {
			t.Fatalf("status %d, want 403; body %s", r.status, r.body)
		}
		if d := parseDeny(t, r.body); !hasReason(d.DenyReasons, "tenant-mismatch") {
			t.Errorf("deny_reasons = %q, want tenant-mismatch", d.DenyReasons)
		}
		// ValidateToken runs no policy: it refuses the tenant itself.
		if v := validate(t, s, idp.Token(t, "globex-admin")); v.GetAllowed() || v.GetReason() != "tenant-mismatch" || v.GetClaims() != nil {
			t.Errorf("ValidateToken = allowed %v reason %q claims %v, want false tenant-mismatch and no claims", v.GetAllowed(), v.GetReason(), v.GetClaims())
		}
	})

	t.Run("a token without tenant_id is invalid", func(t *testing.T) {
		tok := idp.Token(t, "tenantless")
		if v := validate(t, s, tok); v.GetAllowed() || v.GetReason() != "tenant-missing" {
			t.Errorf("ValidateToken = allowed %v reason %q, want false tenant-missing", v.GetAllowed(), v.GetReason())
		}
		if r := envoyCheck(t, s, "GET", "/orders/1", tok, nil); r.status != http.StatusUnauthorized {
			t.Errorf("Check status %d, want 401", r.status)
		}
	})

	t.Run("HTTP validate-token mirrors gRPC", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, s.URL("/v1/validate-token"), strings.NewReader(`{"token":"`+viewer+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		status, h, body := harness.Do(t, req)
		if status != http.StatusOK {
			t.Fatalf("POST /v1/validate-token: %s", harness.Describe(status, h, body))
		}
		var got struct {
			Allowed  bool           `json:"allowed"`
			Reason   string         `json:"reason"`
			Subject  string         `json:"subject"`
			TenantID string         `json:"tenant_id"`
			Claims   map[string]any `json:"claims"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("body: %v: %s", err, body)
		}
		if !got.Allowed || got.Reason != "ok" || got.Subject != "orders-viewer" || got.TenantID != "acme" || got.Claims["tenant_id"] != "acme" {
			t.Errorf("validate-token = %+v", got)
		}
	})

	t.Run("key rotation needs no restart", func(t *testing.T) {
		oldKid := tokenKid(t, viewer)
		newKid := idp.Rotate(t, false)
		if newKid == oldKid {
			t.Fatalf("rotation kept kid %q", oldKid)
		}
		rotated := idp.Token(t, "orders-viewer")
		if got := tokenKid(t, rotated); got != newKid {
			t.Fatalf("token after rotation has kid %q, want %q", got, newKid)
		}
		if v := validate(t, s, rotated); !v.GetAllowed() || v.GetReason() != "ok" {
			t.Fatalf("token with the new kid: allowed %v reason %q (%s), want true ok", v.GetAllowed(), v.GetReason(), v.GetMessage())
		}
		if r := envoyCheck(t, s, "GET", "/orders/1", rotated, nil); r.status != http.StatusOK {
			t.Errorf("Check with the new kid: status %d; body %s", r.status, r.body)
		}
		// The old key is still published: its tokens keep working.
		if v := validate(t, s, viewer); !v.GetAllowed() {
			t.Errorf("token of the previous key during the overlap: reason %q", v.GetReason())
		}

		// A second rotation that retires every earlier key.
		retiredKid := idp.Rotate(t, true)
		latest := idp.Token(t, "orders-viewer")
		if got := tokenKid(t, latest); got != retiredKid {
			t.Fatalf("token after the second rotation has kid %q, want %q", got, retiredKid)
		}
		if v := validate(t, s, latest); !v.GetAllowed() {
			t.Errorf("token after the second rotation: reason %q (%s)", v.GetReason(), v.GetMessage())
		}
		// The retired keys took the tokens they verified with them, even
		// those the sidecar had cached and that are far from expiring.
		if v := validate(t, s, viewer); v.GetAllowed() || v.GetReason() != "unknown-kid" {
			t.Errorf("cached token of a retired key: allowed %v reason %q, want false unknown-kid", v.GetAllowed(), v.GetReason())
		}
		if r := envoyCheck(t, s, "GET", "/orders/1", viewer, nil); r.status != http.StatusUnauthorized {
			t.Errorf("Check with a token of a retired key: status %d, want 401; body %s", r.status, r.body)
		}
	})
}

// TestOIDCProviderAudience checks that a sidecar expecting another
// audience or issuer refuses the provider's tokens.
func TestOIDCProviderAudience(t *testing.T) {
	t.Parallel()
	idp := harness.StartIDP(t, idpResource, 5*time.Minute, idpClients[0])
	tok := idp.Token(t, "orders-viewer")

	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"other audience", map[string]string{"SVC_JWT_AUDIENCES": "urn:svc:e2e:billing"}, "audience-mismatch"},
		{"other issuer", map[string]string{"SVC_JWT_ISSUER": "https://idp.example.test"}, "issuer-mismatch"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"SVC_JWKS_URL": idp.JWKSURL}
			for k, v := range tc.env {
				env[k] = v
			}
			s := harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig, Env: env})
			if v := validate(t, s, tok); v.GetAllowed() || v.GetReason() != tc.want {
				t.Errorf("ValidateToken = allowed %v reason %q, want false %q", v.GetAllowed(), v.GetReason(), tc.want)
			}
			if r := envoyCheck(t, s, "GET", "/orders/1", tok, nil); r.status != http.StatusUnauthorized {
				t.Errorf("Check status %d, want 401", r.status)
			}
		})
	}
}

// equalJSON compares two values by their JSON encoding.
func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// splitRoles splits an x-svc-roles header value (comma- or
// space-separated).
func splitRoles(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' })
}
