package main

import (
	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/cmd/internal/samlcmd"
)

// samlCommand mounts the saml commands that svc-sidecar shares
// (cmd/internal/samlcmd) with core's global flags and exit codes.
func (a *app) samlCommand() *cobra.Command {
	return samlcmd.New(samlcmd.Host{
		Stdout: a.stdout, Stderr: a.stderr,
		ConfigPath:     a.configPath,
		JSON:           func() bool { return a.useJSON() },
		WriteJSON:      a.writeJSON,
		LegacyArtifact: func() string { return a.legacyArtifact },
		UsageError:     usageError,
		InputError:     inputError,
		Mark: func(cmd *cobra.Command, artifact string) {
			readsConfig(cmd)
			setAnnotation(cmd, annotArtifact, artifact)
		},
	})
}
