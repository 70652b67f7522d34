package samlgw_test

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit/samltest"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/samlgw"
)

// newGateway is New on the fixture's configuration changed by edit,
// served on listen, with getenv as the environment; it returns New's
// error.
func newGateway(t *testing.T, getenv func(string) string, listen string, edit func(*config.Config)) (*samlgw.Gateway, error) {
	t.Helper()
	md := samltest.MetadataFile(t, testIdP)
	cfg := config.Config{Source: "svc.toml", SDK: config.SDK{SAML: &config.SAML{
		EntityID: entityID, ACSURL: acsURL, IDPMetadataFile: md,
	}}}
	cfg.SetDefaults()
	edit(&cfg)
	is, err := issuer.New(issuer.Options{Issuer: entityID, TTL: cfg.SDK.SAML.TokenTTL.Duration})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := samlgw.New(cfg, samlgw.Deps{Issuer: is, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Getenv: getenv, ListenAddr: listen})
	if gw != nil {
		t.Cleanup(func() { gw.Close() })
	}
	return gw, err
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// SVC_ENV=development turns signature checks off only in a local trial:
// every listener on loopback (or a Unix socket) and no identity source
// but the gateway. Anywhere else the gateway refuses to start, naming the
// variable and the listener or setting that makes the configuration a
// production one; sdk.fail_mode decides nothing.
func TestDevelopmentEnvOnlyInLocalTrial(t *testing.T) {
	dev := env(map[string]string{"SVC_ENV": "development"})
	const local = "127.0.0.1:7701"
	refused := []struct {
		name   string
		listen string
		edit   func(*config.Config)
		want   string // the listener or setting named
	}{
		{"jwks_url", local, func(c *config.Config) { c.SDK.JWKSURL = "https://idp.example.com/jwks" }, "sdk.jwks_url (svc.toml) is set"},
		{"jwks_url from the environment", local, func(c *config.Config) {
			c.SDK.JWKSURL = "https://idp.example.com/jwks"
			c.Overrides = map[string]string{"sdk.jwks_url": "SVC_JWKS_URL"}
		}, "sdk.jwks_url (SVC_JWKS_URL) is set"},
		{"sign-in listener on every interface", "0.0.0.0:7701", func(c *config.Config) {
			c.Sidecar.SAMLAddr = "0.0.0.0:7701"
			c.Overrides = map[string]string{"sidecar.saml_addr": "SVC_SAML_ADDR"}
		}, `sidecar.saml_addr (SVC_SAML_ADDR) "0.0.0.0:7701" is not a loopback address`},
		{"gRPC listener public", local, func(c *config.Config) { c.SDK.SidecarAddr = "[::]:50051" },
			`sdk.sidecar_addr (svc.toml) "[::]:50051" is not a loopback address`},
		{"HTTP listener public", local, func(c *config.Config) { c.Sidecar.HTTPAddr = "10.1.2.3:7700" },
			`sidecar.http_addr (svc.toml) "10.1.2.3:7700" is not a loopback address`},
		{"embedded on a public listener", "0.0.0.0:8080", func(*config.Config) {},
			`the listener that serves the gateway "0.0.0.0:8080" (samlgw.Deps.ListenAddr) is not a loopback address`},
		{"embedded, listener unknown", "", func(*config.Config) {}, "samlgw.Deps.ListenAddr is empty"},
		{"OpenID Connect sign-in beside it", local, func(c *config.Config) {
			c.SDK.OIDC = &config.OIDC{IssuerURL: "http://127.0.0.1:9400", ClientID: "app", RedirectURL: "http://127.0.0.1:7701/auth/oidc/callback"}
		}, "sdk.oidc (svc.toml) is set"},
		{"production", local, func(c *config.Config) {
			c.SDK.FailMode = config.FailClosed
			c.SDK.JWKSURL = "https://idp.example.com/jwks"
			c.Policy.BundleVerifyKeyFile = "/etc/svc/bundle.pub"
			c.Sidecar.AdminTokenFile = "/etc/svc/admin-token"
		}, "sdk.jwks_url (svc.toml) is set"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			gw, err := newGateway(t, dev, tt.listen, tt.edit)
			if err == nil {
				t.Fatalf("New accepted SVC_ENV=development (signatures checked: %v)", !gw.Status().SignatureCheckDisabled)
			}
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("error %v is not a configuration error", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "SVC_ENV: ") || !strings.Contains(msg, tt.want) || !strings.Contains(msg, "unset SVC_ENV") {
				t.Errorf("error %q: want it to start with SVC_ENV, name %s and say to unset SVC_ENV", msg, tt.want)
			}
			// Without the variable the same configuration starts and
			// checks signatures.
			gw, err = newGateway(t, env(nil), tt.listen, tt.edit)
			if err != nil {
				t.Fatal(err)
			}
			if gw.Status().SignatureCheckDisabled {
				t.Error("signatures not checked without SVC_ENV")
			}
		})
	}

	// In a local trial it still turns the checks off, fail_mode closed or
	// not, on TCP loopback or Unix sockets; another value of the variable
	// does nothing.
	for name, tc := range map[string]struct {
		getenv func(string) string
		listen string
		edit   func(*config.Config)
		off    bool
	}{
		"development":              {dev, local, func(*config.Config) {}, true},
		"development, fail closed": {dev, local, func(c *config.Config) { c.SDK.FailMode = config.FailClosed }, true},
		"development, ::1 and sockets": {dev, "[::1]:7701", func(c *config.Config) {
			c.SDK.SidecarAddr, c.Sidecar.HTTPAddr, c.Sidecar.SAMLAddr = "unix:///run/svc/grpc.sock", "unix:///run/svc/http.sock", "[::1]:7701"
		}, true},
		"production": {env(map[string]string{"SVC_ENV": "production"}), local, func(*config.Config) {}, false},
		"unset":      {env(nil), local, func(*config.Config) {}, false},
	} {
		gw, err := newGateway(t, tc.getenv, tc.listen, tc.edit)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := gw.Status().SignatureCheckDisabled; got != tc.off {
			t.Errorf("%s in a local trial: signature check disabled %v, want %v", name, got, tc.off)
		}
	}
}

// An application that embeds the gateway on a public listener cannot
// accept IdP-initiated sign-on without Redis, though its configuration's
// own (unused) listeners are on loopback: the replay cache would be per
// process.
func TestIdPInitiatedEmbeddedNeedsLocalListener(t *testing.T) {
	allow := func(c *config.Config) { c.SDK.SAML.AllowIDPInitiated = true }
	_, err := newGateway(t, env(nil), "0.0.0.0:8080", allow)
	if err == nil || !errors.Is(err, config.ErrInvalid) ||
		!strings.Contains(err.Error(), "sdk.saml.allow_idp_initiated") || !strings.Contains(err.Error(), `"0.0.0.0:8080"`) {
		t.Fatalf("New = %v, want the refusal naming allow_idp_initiated and the listener", err)
	}
	if _, err := newGateway(t, env(nil), "localhost:8080", allow); err != nil {
		t.Errorf("on a loopback listener: %v", err)
	}
	if _, err := newGateway(t, env(nil), "0.0.0.0:8080", func(c *config.Config) {
		allow(c)
		c.RateLimit.RedisAddr = "127.0.0.1:1"
	}); err != nil {
		t.Errorf("with Redis: %v", err)
	}
}
