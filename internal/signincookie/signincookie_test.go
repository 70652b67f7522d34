package signincookie

import (
	"testing"

	"github.com/svc-dev/svc/engine/config"
)

// TestPrefixedOnly: the checks read only the __Host- session cookie when
// every configured gateway sets its cookies Secure, and the unprefixed
// one too when any of them runs on plain http on loopback.
func TestPrefixedOnly(t *testing.T) {
	saml := func(acs string) *config.SAML { return &config.SAML{ACSURL: acs} }
	oidc := func(redirect string, providers ...string) *config.OIDC {
		o := &config.OIDC{IssuerURL: "https://idp.example.com", RedirectURL: redirect}
		for _, r := range providers {
			o.Providers = append(o.Providers, config.OIDCProvider{Name: "p" + r, IssuerURL: "https://other.example.com", RedirectURL: r})
		}
		return o
	}
	tests := []struct {
		name string
		saml *config.SAML
		oidc *config.OIDC
		want bool
	}{
		{"no gateway", nil, nil, false},
		{"SAML on https", saml("https://app.example.com/auth/saml/acs"), nil, true},
		{"SAML on http on loopback", saml("http://127.0.0.1:8080/auth/saml/acs"), nil, false},
		{"SAML on http on localhost", saml("http://localhost:8080/auth/saml/acs"), nil, false},
		{"SAML on http elsewhere", saml("http://app.example.com/auth/saml/acs"), nil, true},
		{"OIDC on https", nil, oidc("https://app.example.com/auth/oidc/callback"), true},
		{"OIDC on loopback http", nil, oidc("http://127.0.0.1:8080/auth/oidc/callback"), false},
		{"OIDC provider on loopback http", nil, oidc("https://app.example.com/auth/oidc/callback", "http://127.0.0.1:8080/auth/oidc/callback"), false},
		{"both on https", saml("https://app.example.com/auth/saml/acs"), oidc("https://app.example.com/auth/oidc/callback"), true},
		{"SAML on https, OIDC on loopback http", saml("https://app.example.com/auth/saml/acs"), oidc("http://127.0.0.1/auth/oidc/callback"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg config.Config
			cfg.SDK.SAML, cfg.SDK.OIDC = tt.saml, tt.oidc
			if got := PrefixedOnly(cfg); got != tt.want {
				t.Errorf("PrefixedOnly = %v, want %v", got, tt.want)
			}
		})
	}
}
