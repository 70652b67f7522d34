package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// samlOnly is a SAML-only configuration on the default (loopback)
// listeners: a local trial of the gateway.
func samlOnly() Config {
	c := Config{Source: "svc.toml", SDK: SDK{SAML: &SAML{
		EntityID:        "http://localhost:7701/auth/saml/metadata",
		ACSURL:          "http://localhost:7701/auth/saml/acs",
		IDPMetadataFile: "/etc/svc/idp.xml",
	}}}
	c.SetDefaults()
	return c
}

// Every identity source turns development mode off on its own, whatever
// sdk.fail_mode says; the cases must cover the whole list, so that a
// source added to it comes with its case here.
func TestIdentitySourcesEndDevelopmentMode(t *testing.T) {
	sources := map[string]func(*Config){
		"sdk.jwks_url":   func(c *Config) { c.SDK.JWKSURL = "https://idp.example.com/jwks" },
		"sdk.saml":       func(c *Config) { c.SDK.SAML = &SAML{} },
		"jwt.issuer_url": func(c *Config) { c.JWT.IssuerURL = "https://idp.example.com" },
		"jwt.issuers": func(c *Config) {
			c.JWT.Issuers = []JWTIssuer{{Issuer: "https://idp.example.com", JWKSURL: "https://idp.example.com/jwks"}}
		},
		"api_keys.file": func(c *Config) { c.APIKeys.File = "/etc/svc/api-keys.toml" },
		"client_certs.trust_domains": func(c *Config) {
			c.ClientCerts.TrustDomains = map[string]string{"acme.example": "acme"}
		},
		"introspection.url": func(c *Config) {
			c.Introspection.URL = "https://idp.example.com/introspect"
		},
		"sdk.oidc": func(c *Config) { c.SDK.OIDC = &OIDC{IssuerURL: "https://idp.example.com"} },
	}
	if got, want := slices.Sorted(func(yield func(string) bool) {
		for k := range sources {
			if !yield(k) {
				return
			}
		}
	}), slices.Sorted(slices.Values(IdentitySourceKeys())); !slices.Equal(got, want) {
		t.Fatalf("cases cover %v, the identity sources are %v", got, want)
	}
	for key, set := range sources {
		for _, mode := range []string{"", FailOpen, FailClosed} {
			t.Run(key+"/fail_mode="+mode, func(t *testing.T) {
				c := Config{SDK: SDK{FailMode: mode}}
				if !c.DevMode() || len(c.IdentitySources()) != 0 {
					t.Fatalf("no source: DevMode %v, sources %v; want development mode", c.DevMode(), c.IdentitySources())
				}
				set(&c)
				if c.DevMode() {
					t.Errorf("DevMode() = true with %s", key)
				}
				if got := c.IdentitySources(); !slices.Equal(got, []string{key}) {
					t.Errorf("IdentitySources() = %v, want [%s]", got, key)
				}
			})
		}
	}
}

// fail_mode = "closed" without any identity source is refused with an
// error that names what is missing; with only [sdk.saml] it starts.
func TestFailClosedNeedsIdentitySource(t *testing.T) {
	c := Config{Source: "svc.toml", SDK: SDK{FailMode: FailClosed}}
	c.SetDefaults()
	err := c.Validate()
	if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "sdk.fail_mode") ||
		!strings.Contains(err.Error(), "requires an identity source (sdk.jwks_url or sdk.saml or jwt.issuer_url or jwt.issuers or api_keys.file or client_certs.trust_domains or introspection.url or sdk.oidc)") {
		t.Fatalf("Validate = %v, want the refusal of fail_mode=closed naming the identity sources", err)
	}
	c = samlOnly()
	c.SDK.FailMode = FailClosed
	if err := c.Validate(); err != nil {
		t.Errorf("fail_mode=closed with [sdk.saml]: %v", err)
	}
}

func TestProductionSetting(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" for a local trial
	}{
		{"defaults", func(*Config) {}, ""},
		{"fail closed does not decide", func(c *Config) { c.SDK.FailMode = FailClosed }, ""},
		{"unix sockets", func(c *Config) {
			c.SDK.SidecarAddr, c.Sidecar.HTTPAddr = "unix:///run/svc/grpc.sock", "unix:///run/svc/http.sock"
		}, ""},
		{"localhost and ::1", func(c *Config) {
			c.SDK.SidecarAddr, c.Sidecar.HTTPAddr, c.Sidecar.SAMLAddr = "[::1]:1", "localhost:2", "127.0.0.2:3"
		}, ""},
		{"jwks_url", func(c *Config) { c.SDK.JWKSURL = "https://idp.example.com/jwks" }, "sdk.jwks_url (svc.toml) is set"},
		{"jwks_url from the environment", func(c *Config) {
			c.SDK.JWKSURL = "https://idp.example.com/jwks"
			c.Overrides = map[string]string{"sdk.jwks_url": "SVC_JWKS_URL"}
		}, "sdk.jwks_url (SVC_JWKS_URL) is set"},
		{"sign-in on every interface", func(c *Config) {
			c.Sidecar.SAMLAddr = "0.0.0.0:7701"
			c.Overrides = map[string]string{"sidecar.saml_addr": "SVC_SAML_ADDR"}
		}, `sidecar.saml_addr (SVC_SAML_ADDR) "0.0.0.0:7701" is not a loopback address`},
		{"sign-in without a host", func(c *Config) { c.Sidecar.SAMLAddr = ":7701" }, `sidecar.saml_addr (svc.toml) ":7701" is not a loopback address`},
		{"gRPC on a private address", func(c *Config) { c.SDK.SidecarAddr = "10.0.0.5:50051" }, `sdk.sidecar_addr (svc.toml) "10.0.0.5:50051" is not a loopback address`},
		{"HTTP on every interface", func(c *Config) {
			c.Sidecar.HTTPAddr = "[::]:7700"
			c.Lines = map[string]int{"sidecar.http_addr": 4}
		}, `sidecar.http_addr (svc.toml:4) "[::]:7700" is not a loopback address`},
		{"HTTP on a host name", func(c *Config) { c.Sidecar.HTTPAddr = "app.internal:7700" }, `sidecar.http_addr (svc.toml) "app.internal:7700" is not a loopback address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := samlOnly()
			tt.edit(&c)
			if got := c.ProductionSetting(); got != tt.want {
				t.Errorf("ProductionSetting() = %q, want %q", got, tt.want)
			}
		})
	}
}

// allow_idp_initiated without Redis follows the local-trial rule: on
// loopback listeners with only [sdk.saml] it is accepted, whatever
// fail_mode says; a listener elsewhere or another identity source
// refuses it, naming what makes the configuration a production one.
func TestValidateIdPInitiatedLocalTrial(t *testing.T) {
	for name, edit := range map[string]func(*Config){
		"open":   func(c *Config) { c.SDK.FailMode = FailOpen },
		"closed": func(c *Config) { c.SDK.FailMode = FailClosed },
	} {
		c := samlOnly()
		c.SDK.SAML.AllowIDPInitiated = true
		edit(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("%s, loopback, SAML only: %v", name, err)
		}
	}
	for name, tc := range map[string]struct {
		edit func(*Config)
		want string
	}{
		"sign-in listener public": {func(c *Config) { c.Sidecar.SAMLAddr = "0.0.0.0:7701" }, `sidecar.saml_addr (svc.toml) "0.0.0.0:7701" is not a loopback address`},
		"jwks_url":                {func(c *Config) { c.SDK.JWKSURL = "https://idp.example.com/jwks" }, "sdk.jwks_url (svc.toml) is set"},
	} {
		c := samlOnly()
		c.SDK.SAML.AllowIDPInitiated = true
		tc.edit(&c)
		err := c.Validate()
		if len(Errors(err)) != 1 {
			t.Fatalf("%s: Validate = %v, want one error", name, err)
		}
		msg := err.Error()
		for _, want := range []string{"sdk.saml.allow_idp_initiated", "requires rate_limit.redis_addr", tc.want} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not say %q", name, msg, want)
			}
		}
		c.RateLimit.RedisAddr = "127.0.0.1:6379"
		if err := c.Validate(); err != nil {
			t.Errorf("%s with Redis: %v", name, err)
		}
	}
}
