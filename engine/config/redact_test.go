package config

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://idp.example.com/jwks", "https://idp.example.com/jwks"},
		{"https://idp.example.com/jwks?token=s3cret&x=1", "https://idp.example.com/jwks?token=REDACTED&x=REDACTED"},
		{"https://alice:pw@idp.example.com/jwks", "https://REDACTED@idp.example.com/jwks"},
		{"https://alice@idp.example.com/meta?sig=abc", "https://REDACTED@idp.example.com/meta?sig=REDACTED"},
		{"127.0.0.1:6379", "127.0.0.1:6379"},
		{"/etc/svc/admin-token", "/etc/svc/admin-token"},
		{"not a url ://", "not a url ://"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			if got := RedactURL(tc.in); got != tc.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestRedactedLeavesOriginal: Redacted reaches URLs inside pointers and
// changes a copy only.
func TestRedactedLeavesOriginal(t *testing.T) {
	var c Config
	c.SDK.JWKSURL = "https://u:p@idp.example.com/jwks?k=v"
	c.SDK.SAML = &SAML{IDPMetadataURL: "https://idp.example.com/meta?sig=secret"}
	c.JWT.Audiences = []string{"https://api.example.com/?key=secret"}
	r := c.Redacted()
	for _, s := range []string{r.SDK.JWKSURL, r.SDK.SAML.IDPMetadataURL, r.JWT.Audiences[0]} {
		if strings.Contains(s, "secret") || strings.Contains(s, "u:p") {
			t.Errorf("redacted value %q still shows a credential", s)
		}
	}
	if c.SDK.SAML.IDPMetadataURL != "https://idp.example.com/meta?sig=secret" || c.JWT.Audiences[0] != "https://api.example.com/?key=secret" {
		t.Error("Redacted changed the original configuration")
	}
}
