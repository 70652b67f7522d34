package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestOIDCDiscovery starts the sidecar with only the provider's issuer
// (SVC_JWT_ISSUER_URL): it finds the keys through oidc-provider's
// discovery document and allows a request with a token it issued.
func TestOIDCDiscovery(t *testing.T) {
	t.Parallel()
	idp := harness.StartIDP(t, idpResource, 5*time.Minute, idpClients[0])
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig, Env: map[string]string{
		"SVC_JWT_ISSUER_URL": idp.Issuer,
		"SVC_JWT_AUDIENCES":  idpResource,
	}})
	viewer := idp.Token(t, "orders-viewer")
	if v := validate(t, s, viewer); !v.GetAllowed() || v.GetReason() != "ok" || v.GetTenantId() != "acme" {
		t.Fatalf("ValidateToken = allowed %v reason %q (%s) tenant %q, want true ok acme", v.GetAllowed(), v.GetReason(), v.GetMessage(), v.GetTenantId())
	}
	if r := envoyCheck(t, s, "GET", "/orders/1", viewer, nil); r.status != http.StatusOK {
		t.Fatalf("Envoy Check status %d, want 200; body %s", r.status, r.body)
	}
	st := getStatus(t, s)
	if len(st.JWKSIssuers) != 1 || st.JWKSIssuers[0].Issuer != idp.Issuer || st.JWKSIssuers[0].URL != idp.JWKSURL || st.JWKSKeys == 0 {
		t.Errorf("status jwks_issuers %+v, keys %d; want the issuer with its discovered jwks_uri", st.JWKSIssuers, st.JWKSKeys)
	}
}

// TestSeveralIssuers serves the users of two providers from one
// configuration file: oidc-provider found by discovery, whose tokens
// carry their tenant in tenant_id, and a partner's static JWKS, whose
// tokens all belong to one fixed tenant. Each token is verified with
// the keys of the provider its iss names.
func TestSeveralIssuers(t *testing.T) {
	t.Parallel()
	idp := harness.StartIDP(t, idpResource, 5*time.Minute, idpClients[0], idpClients[2])
	partner := harness.NewECSigner(t, "partner-1")
	keys := harness.StartJWKS(t, partner)
	const partnerIss, partnerAud = "https://partner.example.test", "urn:svc:e2e:partner"
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig + fmt.Sprintf(`
[jwt]
audiences = [%q]

[[jwt.issuers]]
issuer_url = %q
tenant_claim = "tenant_id"

[[jwt.issuers]]
issuer = %q
jwks_url = %q
audiences = [%q]
tenant = "acme"
`, idpResource, idp.Issuer, partnerIss, keys.URL, partnerAud)})

	partnerToken := func(iss string, signer *harness.Signer) string {
		c := harness.Claims("partner-bot", "", "viewer")
		delete(c, "tenant_id")
		c["iss"], c["aud"] = iss, partnerAud
		return signer.Token(t, c)
	}
	intruder := harness.NewECSigner(t, "partner-1")
	tests := []struct {
		name, token, reason, tenant string
	}{
		{"provider's token: tenant from its claim", idp.Token(t, "orders-viewer"), "ok", "acme"},
		{"provider's token of another tenant", idp.Token(t, "globex-admin"), "tenant-mismatch", ""},
		{"partner's token: the fixed tenant", partnerToken(partnerIss, partner), "ok", "acme"},
		{"unknown issuer", partnerToken("https://other.example.test", partner), "issuer-unknown", ""},
		{"partner's key with the provider's iss", partnerToken(idp.Issuer, partner), "unknown-kid", ""},
		{"another key under the partner's kid", partnerToken(partnerIss, intruder), "signature-invalid", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := validate(t, s, tc.token)
			if v.GetReason() != tc.reason || v.GetTenantId() != tc.tenant {
				t.Fatalf("ValidateToken = reason %q (%s) tenant %q, want %q %q", v.GetReason(), v.GetMessage(), v.GetTenantId(), tc.reason, tc.tenant)
			}
		})
	}
	if r := envoyCheck(t, s, "GET", "/orders/1", partnerToken(partnerIss, partner), nil); r.status != http.StatusOK {
		t.Errorf("Envoy Check with the partner's token: status %d, want 200; body %s", r.status, r.body)
	}
	if r := envoyCheck(t, s, "GET", "/orders/1", partnerToken("https://other.example.test", partner), nil); r.status != http.StatusUnauthorized {
		t.Errorf("Envoy Check with an unknown issuer: status %d, want 401", r.status)
	}
	testkit.Eventually(t, "both issuers in /v1/status with their keys", func() bool {
		st := getStatus(t, s)
		return len(st.JWKSIssuers) == 2 && st.JWKSIssuers[0].Issuer == idp.Issuer && st.JWKSIssuers[0].Keys > 0 &&
			st.JWKSIssuers[1].Issuer == partnerIss && st.JWKSIssuers[1].Keys == 1 && st.Ready
	})
}
