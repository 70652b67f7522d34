package main

import (
	"context"
	"log/slog"
	"testing"

	"github.com/svc-dev/svc/internal/testkit/samltest"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
)

// TestHandoverReadySAMLOnly: a new image of a SAML-only deployment (no
// sdk.jwks_url; tokens come from the local issuer) can verify tokens at
// once, so the handover does not hold connections waiting for a JWKS
// that will never come (30 s before). The wait is asked with its
// context already ended: it answers from its first look.
func TestHandoverReadySAMLOnly(t *testing.T) {
	md := samltest.MetadataFile(t, samltest.New(t))
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	cfg.SDK.FailMode = config.FailClosed
	cfg.SDK.SAML = &config.SAML{
		EntityID: "https://shop.example/auth/saml/metadata", ACSURL: "https://shop.example/auth/saml/acs",
		IDPMetadataFile: md,
	}
	cfg.Audit.Destination = config.AuditOff
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	eng, err := engine.New(cfg, engine.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	if eng.Status().DevMode {
		t.Fatal("the SAML-only configuration is in development mode; the test no longer covers the case")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if !waitEngineReady(ctx, eng, quiet) {
		t.Error("a SAML-only image is not ready to take over: the handover would wait for a JWKS")
	}

	// With a JWKS that does not answer, the image still waits.
	cfg.SDK.JWKSURL = "http://127.0.0.1:1/jwks"
	withJWKS, err := engine.New(cfg, engine.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = withJWKS.Close() })
	if waitEngineReady(ctx, withJWKS, quiet) {
		t.Error("an image whose JWKS is not cached counts as ready")
	}
}
