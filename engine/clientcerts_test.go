package engine_test

import (
	"context"
	"net/url"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/clientcert"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
	"github.com/svc-dev/svc/reason"
)

const (
	orderReader = "spiffe://acme.example/ns/shop/sa/orders"
	noRoles     = "spiffe://acme.example/ns/shop/sa/other"
)

// clientCertEngine is an engine whose only identity source is
// [client_certs]: acme.example is tenant acme, and orderReader a viewer.
func clientCertEngine(t testing.TB, deps engine.Deps) *engine.Engine {
	t.Helper()
	cfg := prodConfig("")
	cfg.ClientCerts.TrustDomains = map[string]string{"acme.example": "acme"}
	cfg.ClientCerts.Roles = map[string][]string{orderReader: {"viewer"}}
	cfg.RateLimit.DefaultRPM = 1 << 40
	return newEngine(t, cfg, deps)
}

func certCred(p clientcert.Presented) engine.Credential { return engine.Credential{ClientCert: p} }

func TestClientCertDecisions(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	e := clientCertEngine(t, engine.Deps{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if e.DevMode() {
		t.Fatal("client_certs.trust_domains set, yet development mode")
	}
	ca := testkit.NewCA(t, "mesh CA")
	cert := url.PathEscape(string(ca.Client(t, orderReader).CertPEM))
	ctx := context.Background()
	tests := []credentialCase{
		{"envoy principal, viewer reads", certCred(clientcert.Presented{Principal: orderReader}), "orders:read", true, reason.PolicyAllow},
		{"envoy certificate, viewer reads", certCred(clientcert.Presented{Principal: orderReader, Certificate: cert}), "orders:read", true, reason.PolicyAllow},
		{"xfcc, viewer reads", certCred(clientcert.Presented{XFCC: `Cert="` + cert + `"`}), "orders:read", true, reason.PolicyAllow},
		{"viewer deletes", certCred(clientcert.Presented{Principal: orderReader}), "orders:delete", false, reason.PolicyDeny},
		{"no roles", certCred(clientcert.Presented{Principal: noRoles}), "orders:read", false, reason.PolicyDeny},
		{"unmapped trust domain", certCred(clientcert.Presented{Principal: "spiffe://evil.example/ns/shop/sa/orders"}), "orders:read", false, reason.ClientCertUntrusted},
		{"malformed xfcc", certCred(clientcert.Presented{XFCC: `URI="spiffe://acme.example/x`}), "orders:read", false, reason.ClientCertInvalid},
		{"certificate and principal differ", certCred(clientcert.Presented{Principal: noRoles, Certificate: cert}), "orders:read", false, reason.ClientCertInvalid},
		{"a bearer token is judged first", engine.Credential{Bearer: "eyJhbGciOiJFUzI1NiJ9.e30.c2ln", ClientCert: clientcert.Presented{Principal: orderReader}}, "orders:read", false, reason.IssuerUnknown},
		{"nothing", engine.Credential{}, "orders:read", false, reason.TokenMissing},
	}
	checkCredentialDecisions(t, e, tests)
	res, _ := e.Decide(ctx, engine.Request{Scope: engine.ScopeToken, Credential: certCred(clientcert.Presented{Principal: orderReader})})
	if d := res.Token; !d.Allowed || d.Subject != orderReader || d.TenantID != "acme" || d.Kind != engine.KindMTLS || d.Claims["sub"] != orderReader {
		t.Fatalf("ValidateToken with a client certificate = %+v", d)
	}
	res, _ = e.Decide(ctx, engine.Request{Credential: certCred(clientcert.Presented{Principal: noRoles}), Input: engine.Input{Action: "orders:read"}})
	if u := res.Input.User; u.ID != noRoles || u.TenantID != "acme" || len(u.Roles) != 0 || u.Roles == nil || u.Claims["trust_domain"] != "acme.example" {
		t.Fatalf("input.user = %+v, want the certificate's identity without roles", u)
	}
	got := metrictest.Values(metrictest.Collect(t, reader), "svc.client_certs.verifications", "outcome")
	want := map[string]int64{"ok": 7, "client-cert-invalid": 2, "client-cert-untrusted": 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("svc.client_certs.verifications{outcome=%s} = %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if st := e.Status().ClientCerts; st == nil || st.TrustDomains != 1 || st.Roles != 1 || st.Accepted != 7 || st.Invalid != 2 || st.Untrusted != 1 {
		t.Fatalf("Status().ClientCerts = %+v", st)
	}
}

// Without [client_certs] a certificate is no credential: the caller
// presented none.
func TestClientCertIgnoredWithoutTrustDomains(t *testing.T) {
	e, _, _, _ := apiKeyEngine(t, engine.Deps{})
	res, err := e.Decide(context.Background(), engine.Request{Credential: certCred(clientcert.Presented{Principal: orderReader}), Input: engine.Input{Action: "orders:read"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Decision.Reason != reason.TokenMissing || e.Status().ClientCerts != nil {
		t.Fatalf("reason %s, status %+v; want %s and no client_certs status", res.Decision.Reason, e.Status().ClientCerts, reason.TokenMissing)
	}
}

// BenchmarkVerifyClientCert measures the verdict on a workload's client
// certificate, as nginx passes it, on every request after its first.
func BenchmarkVerifyClientCert(b *testing.B) {
	e := clientCertEngine(b, engine.Deps{})
	cert := url.PathEscape(string(testkit.NewCA(b, "bench CA").Client(b, orderReader).CertPEM))
	req := engine.Request{Scope: engine.ScopeToken, Credential: certCred(clientcert.Presented{XFCC: `Cert="` + cert + `"`})}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res, _ := e.Decide(ctx, req); !res.Token.Allowed {
			b.Fatalf("refused: %+v", res.Token)
		}
	}
}
