package authz

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pelletier/go-toml/v2"

	"github.com/svc-dev/svc/engine/config"
)

// DefaultConfigFile is the file NewClient reads, in the working directory,
// for what the caller leaves unset: the [sdk] keys sidecar_addr and
// fail_mode, as the sidecar and the other SDKs do.
const DefaultConfigFile = "svc.toml"

// clientSettings are the [sdk] keys a client uses. Other keys of the file
// belong to the sidecar and are not the client's to check.
type clientSettings struct {
	SDK struct {
		SidecarAddr string `toml:"sidecar_addr"`
		FailMode    string `toml:"fail_mode"`
	} `toml:"sdk"`
}

// clientDefaults fills addr and mode when empty: SVC_SIDECAR_ADDR and
// SVC_FAIL_MODE first, then sdk.sidecar_addr and sdk.fail_mode of file
// (none when "" or missing), then the defaults ("[::1]:50051", open).
func clientDefaults(addr, mode string, lookupEnv func(string) (string, bool), file string) (string, string, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if addr == "" {
		addr, _ = lookupEnv("SVC_SIDECAR_ADDR")
	}
	if mode == "" {
		mode, _ = lookupEnv("SVC_FAIL_MODE")
	}
	if (addr == "" || mode == "") && file != "" {
		data, err := os.ReadFile(file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return "", "", fmt.Errorf("%s: %w", file, err)
		default:
			var s clientSettings
			if err := toml.Unmarshal(data, &s); err != nil {
				return "", "", fmt.Errorf("%s: %w", file, err)
			}
			if addr == "" {
				addr = s.SDK.SidecarAddr
			}
			if mode == "" {
				mode = s.SDK.FailMode
			}
		}
	}
	if addr == "" {
		addr = config.DefaultSidecarAddr
	}
	return addr, mode, nil
}
