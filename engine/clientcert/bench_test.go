package clientcert

import (
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// BenchmarkIdentify measures what a check with a client certificate
// costs on top of the decision: Envoy's principal alone, Envoy's
// certificate (decoded and parsed on every check), and nginx's
// X-Forwarded-Client-Cert with the certificate.
func BenchmarkIdentify(b *testing.B) {
	const id = "spiffe://acme.example/ns/shop/sa/orders"
	cert := escape(testkit.NewCA(b, "bench CA").Client(b, id).CertPEM)
	for _, bc := range []struct {
		name string
		p    Presented
	}{
		{"principal", Presented{Principal: id}},
		{"certificate", Presented{Principal: id, Certificate: cert}},
		{"xfcc", Presented{XFCC: `Cert="` + cert + `"`}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Identify(bc.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
