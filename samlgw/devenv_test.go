package samlgw_test

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/samlgw"
)

// newGateway is New on the fixture's configuration changed by edit, with
// getenv as the environment; it returns New's error.
func newGateway(t *testing.T, getenv func(string) string, edit func(*config.Config)) (*samlgw.Gateway, error) {
	t.Helper()
	md := filepath.Join(t.TempDir(), "idp.xml")
	if err := os.WriteFile(md, testIdP.Metadata(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{Source: "svc.toml", SDK: config.SDK{SAML: &config.SAML{
		EntityID: entityID, ACSURL: acsURL, IDPMetadataFile: md,
	}}}
	cfg.SetDefaults()
	edit(&cfg)
	is, err := issuer.New(issuer.Options{Issuer: entityID, TTL: cfg.SDK.SAML.TokenTTL.Duration})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := samlgw.New(cfg, samlgw.Deps{Issuer: is, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Getenv: getenv})
	if gw != nil {
		t.Cleanup(func() { gw.Close() })
	}
	return gw, err
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// SVC_ENV=development turns signature checks off only in a development
// configuration (no jwks_url, fail_mode open); with a production one the
// gateway refuses to start, naming the variable and the setting that
// makes the configuration a production one.
func TestDevelopmentEnvOnlyInDevelopmentMode(t *testing.T) {
	dev := env(map[string]string{"SVC_ENV": "development"})
	refused := []struct {
		name string
		edit func(*config.Config)
		want string // the setting named
	}{
		{"fail closed", func(c *config.Config) { c.SDK.FailMode = config.FailClosed }, `sdk.fail_mode (svc.toml) is "closed"`},
		{"fail closed from the environment", func(c *config.Config) {
			c.SDK.FailMode = config.FailClosed
			c.Overrides = map[string]string{"sdk.fail_mode": "SVC_FAIL_MODE"}
		}, `sdk.fail_mode (SVC_FAIL_MODE) is "closed"`},
		{"jwks_url", func(c *config.Config) { c.SDK.JWKSURL = "https://idp.example.com/jwks" }, "sdk.jwks_url (svc.toml) is set"},
		{"production", func(c *config.Config) {
			c.SDK.FailMode = config.FailClosed
			c.SDK.JWKSURL = "https://idp.example.com/jwks"
			c.Policy.BundleVerifyKeyFile = "/etc/svc/bundle.pub"
			c.Sidecar.AdminTokenFile = "/etc/svc/admin-token"
		}, "sdk.jwks_url (svc.toml) is set"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			gw, err := newGateway(t, dev, tt.edit)
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
			gw, err = newGateway(t, env(nil), tt.edit)
			if err != nil {
				t.Fatal(err)
			}
			if gw.Status().SignatureCheckDisabled {
				t.Error("signatures not checked without SVC_ENV")
			}
		})
	}

	// In development mode it still turns the checks off; another value of
	// the variable does nothing.
	for name, tc := range map[string]struct {
		getenv func(string) string
		off    bool
	}{
		"development": {dev, true},
		"production":  {env(map[string]string{"SVC_ENV": "production"}), false},
		"unset":       {env(nil), false},
	} {
		gw, err := newGateway(t, tc.getenv, func(c *config.Config) { c.SDK.FailMode = config.FailOpen })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := gw.Status().SignatureCheckDisabled; got != tc.off {
			t.Errorf("%s in development mode: signature check disabled %v, want %v", name, got, tc.off)
		}
	}
}
