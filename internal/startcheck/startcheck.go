// Package startcheck checks a configuration as svc-sidecar checks it at
// start, without listening, fetching or starting anything, for `core
// config validate`. Each step is the function the start itself runs:
// engine.Check (values, the policy set loads and compiles, the SAML token
// key), tlsfiles.Load (the TLS certificate, key and client CAs),
// idtoken.FromConfig (the identity token signing key) and
// samlgw.CheckFiles (the SP key pair, metadata signing certificates and
// metadata file), so the two cannot disagree on them. What only a running
// sidecar meets (an address in use, an unreachable JWKS, IdP metadata URL
// or Redis) is not checked.
package startcheck

import (
	"log/slog"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/internal/tlsfiles"
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
	if s := cfg.Sidecar; s.TLSCertFile != "" {
		if _, _, err := tlsfiles.Load(s.TLSCertFile, s.TLSKeyFile, s.TLSClientCAFile); err != nil {
			return err
		}
	}
	if _, err := idtoken.FromConfig(cfg, slog.New(slog.DiscardHandler)); err != nil {
		return err
	}
	return samlgw.CheckFiles(cfg)
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
