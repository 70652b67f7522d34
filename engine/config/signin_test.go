package config

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// The keys of [sdk.session] and sidecar.signin_addr have older names;
// setting a key under both names in one place is an error naming both,
// and a variable under either name overrides the file's other name.
func TestSignInOlderNames(t *testing.T) {
	const saml = "[sdk.saml]\nentity_id = \"https://app.example.com/sp\"\nacs_url = \"https://app.example.com/auth/saml/acs\"\nidp_metadata_file = \"/etc/idp.xml\"\n"
	tests := []struct {
		name string
		file string
		env  map[string]string
		want string // error text; "" when accepted
		get  func(Config) string
		val  string
	}{
		{name: "session cookie in both tables", file: saml + "cookie_name = \"a\"\n[sdk.session]\ncookie_name = \"b\"\n",
			want: "sdk.session.cookie_name: must not be set together with sdk.saml.cookie_name"},
		{name: "signin and saml addr", file: "[sidecar]\nsaml_addr = \"127.0.0.1:1\"\nsignin_addr = \"127.0.0.1:2\"\n",
			want: "sidecar.signin_addr: must not be set together with sidecar.saml_addr"},
		{name: "older name in the file", file: saml + "cookie_name = \"old\"\n",
			get: func(c Config) string { return c.SDK.Session.CookieName + " " + c.SDK.SAML.CookieName }, val: "old old"},
		{name: "new name in the file", file: saml + "[sdk.session]\ntoken_ttl = \"1h\"\n",
			get: func(c Config) string { return c.SDK.Session.TokenTTL.String() + " " + c.SDK.SAML.TokenTTL.String() }, val: "1h0m0s 1h0m0s"},
		{name: "variable overrides the older name", file: saml + "cookie_name = \"old\"\n", env: map[string]string{"SVC_SESSION_COOKIE_NAME": "new"},
			get: func(c Config) string { return c.SDK.Session.CookieName + " " + c.SDK.SAML.CookieName }, val: "new new"},
		{name: "old variable overrides the new name", file: "[sidecar]\nsignin_addr = \"127.0.0.1:2\"\n", env: map[string]string{"SVC_SAML_ADDR": "127.0.0.1:3"},
			get: func(c Config) string { return c.Sidecar.SigninAddr + " " + c.Sidecar.SAMLAddr }, val: "127.0.0.1:3 127.0.0.1:3"},
		{name: "both variables", env: map[string]string{"SVC_SAML_ADDR": "127.0.0.1:3", "SVC_SIGNIN_ADDR": "127.0.0.1:4"},
			want: "SVC_SIGNIN_ADDR: must not be set together with sidecar.saml_addr (SVC_SAML_ADDR)"},
		{name: "oidc without issuer", file: "[sdk.oidc]\nclient_id = \"x\"\n", want: "sdk.oidc.issuer_url: must be set"},
		{name: "oidc provider without tenant", file: "[sdk.oidc]\nredirect_url = \"https://app.example.com/auth/oidc/callback\"\n" +
			"[[sdk.oidc.providers]]\nname = \"a\"\nissuer_url = \"https://op.example.com\"\nclient_id = \"c\"\n",
			want: "sdk.oidc.providers[0].tenant: must name the tenant"},
		{name: "oidc scopes without openid", file: "[sdk.oidc]\nissuer_url = \"https://op.example.com\"\nclient_id = \"c\"\n" +
			"redirect_url = \"https://app.example.com/auth/oidc/callback\"\nscopes = [\"email\"]\n", want: "sdk.oidc.scopes: must include openid"},
		{name: "oidc session issuer from redirect_url", file: "[sdk.oidc]\nissuer_url = \"https://op.example.com\"\nclient_id = \"c\"\n" +
			"redirect_url = \"https://app.example.com/auth/oidc/callback\"\n",
			get: func(c Config) string { return c.SDK.Session.Issuer + " " + strings.Join(c.SDK.OIDC.Scopes, ",") }, val: "https://app.example.com openid,email,profile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.file), FormatTOML, "svc.toml")
			if err == nil {
				if err = FromEnv(&cfg, envOf(tt.env)); err == nil {
					cfg.SetDefaults()
					err = cfg.Validate()
				}
			}
			if testkit.ExpectErr(t, err, tt.want) {
				return
			}
			if got := tt.get(cfg); got != tt.val {
				t.Errorf("got %q, want %q", got, tt.val)
			}
		})
	}
}
