// Package startcheck checks a configuration as svc-sidecar checks it at
// start, without listening, fetching or starting anything, for `core
// config validate`. Each step is the function the start itself runs:
// engine.Check (values, the policy set loads and compiles, the SAML token
// key), tlsfiles.Load (the TLS certificate, key and client CAs),
// idtoken.FromConfig (the identity token signing key), SidecarFiles (the
// admin token, bundle verification key and bundle token files) and
// samlgw.CheckFiles (the SP key pair, metadata signing certificates and
// metadata file) and oidcgw.CheckFiles (redirect URLs, client secret
// files), so the two cannot disagree on them. What only a running
// sidecar meets (an address in use, an unreachable JWKS, IdP metadata URL
// or Redis) is not checked.
package startcheck

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/internal/secretfile"
	"github.com/svc-dev/svc/internal/tlsfiles"
	"github.com/svc-dev/svc/oidcgw"
	"github.com/svc-dev/svc/samlgw"
)

// Run reports the first thing svc-sidecar would refuse at start in cfg,
// with the environment getenv reads (Env).
func Run(cfg config.Config, getenv func(string) string) error {
	if err := Env(cfg, getenv); err != nil {
		return err
	}
	if err := engine.Check(cfg); err != nil {
		return err
	}
	cfg.SetDefaults()
	if err := SidecarFiles(cfg); err != nil {
		return err
	}
	if s := cfg.Sidecar; s.TLSCertFile != "" {
		if _, _, err := tlsfiles.Load(s.TLSCertFile, s.TLSKeyFile, s.TLSClientCAFile); err != nil {
			return err
		}
	}
	if _, err := idtoken.FromConfig(cfg, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	if err := samlgw.CheckFiles(cfg); err != nil {
		return err
	}
	return oidcgw.CheckFiles(cfg)
}

// SidecarFiles refuses, at start and on SIGHUP, the files of the
// sidecar's own settings that it reads at each use (so that a rotated
// file takes effect without a restart) when they cannot be used now: the
// admin token file, the bundle verification key and the bundle token
// file. A sidecar that started without them would refuse every admin call
// or every bundle, and say so only then.
func SidecarFiles(cfg config.Config) error {
	if f := cfg.Sidecar.AdminTokenFile; f != "" {
		if _, err := secretfile.Read(cfg.Setting("sidecar.admin_token_file"), f); err != nil {
			return err
		}
	}
	if f := cfg.Policy.BundleVerifyKeyFile; f != "" {
		b, err := os.ReadFile(f)
		if err == nil {
			err = bundle.CheckVerifyKey(b)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.Setting("policy.bundle_verify_key_file"), err)
		}
	}
	if f := cfg.Policy.BundleTokenFile; f != "" {
		if _, err := secretfile.Read(cfg.Setting("policy.bundle_token_file"), f); err != nil {
			return err
		}
	}
	return nil
}

// Env refuses SVC_ENV=development (samlgw.DevEnvVar) outside a local
// trial, with [sdk.saml] or without: the sidecar's help and
// docs/configuration.md say the variable is accepted only there, so a
// production configuration that carries it stops at start (and on
// SIGHUP) rather than run with a switch whose effect depends on a
// section added later. The gateway applies the same rule itself
// (samlgw.DevEnv) when a program embeds it.
func Env(cfg config.Config, getenv func(string) string) error {
	if getenv(samlgw.DevEnvVar) != samlgw.DevEnvValue {
		return nil
	}
	cfg.SetDefaults()
	if why := cfg.ProductionSetting(); why != "" {
		return samlgw.DevEnvRefusal(why)
	}
	return nil
}
