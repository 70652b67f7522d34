package idtoken

import (
	"fmt"
	"log/slog"

	"github.com/svc-dev/svc/engine/config"
)

// FromConfig makes the Minter of cfg's [identity_token], or returns nil
// without one (identity_token.signing_key_file unset). A key file that
// cannot be read or parsed is an error naming the setting and where it
// came from: svc-sidecar refuses to start, `core config validate` says
// so. cfg must have its defaults set.
func FromConfig(cfg config.Config, log *slog.Logger) (*Minter, error) {
	it := cfg.IdentityToken
	if !it.Enabled() {
		return nil, nil
	}
	m, err := New(Options{KeyFile: it.SigningKeyFile, TTL: it.TTL.Duration, Issuer: cfg.SDK.ServiceName, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Setting("identity_token.signing_key_file"), err)
	}
	return m, nil
}
