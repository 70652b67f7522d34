package samlcmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes of Run, as core's: 2 for a usage or input error.
const (
	exitOK    = 0
	exitUsage = 2
)

// runError is an error of Run with whether it is a mistake in the
// command line (then the message points to --help).
type runError struct {
	err   error
	usage bool
}

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// Run runs `<program> saml ...` (args start with "saml") with the flags and
// output of `core saml ...`: the --config and --output global flags, the
// same messages prefixed with the program's name, and exit codes 0 or 2.
// configPath is a --config given before "saml"; one after it wins.
func Run(program string, args []string, configPath string, stdout, stderr io.Writer) int {
	var (
		cfgFlag, output, legacy string
		jsonOut, wroteJSON      bool
	)
	writeJSON := func(v any) error {
		wroteJSON = true
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	}
	usageError := func(format string, a ...any) error {
		return &runError{err: fmt.Errorf(format, a...), usage: true}
	}
	artifact := map[*cobra.Command]bool{}
	h := Host{
		Stdout: stdout, Stderr: stderr,
		ConfigPath:     func() string { return cfgFlag },
		JSON:           func() bool { return jsonOut },
		WriteJSON:      writeJSON,
		LegacyArtifact: func() string { return legacy },
		UsageError:     usageError,
		InputError:     func(err error) error { return &runError{err: err} },
		Mark:           func(cmd *cobra.Command, _ string) { artifact[cmd] = true },
	}
	root := &cobra.Command{
		Use:           program,
		Short:         "SAML commands of " + program,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case output == "text" || output == "json":
				jsonOut = output == "json"
			case artifact[cmd]:
				legacy = output
			default:
				return usageError("invalid --output %q: want text or json (--output chooses the output format and never names a file; commands that write a file take --out <file>)", output)
			}
			if err := CheckConfig(cfgFlag); err != nil {
				return &runError{err: err}
			}
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError("%w", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&cfgFlag, "config", configPath, "svc config file `path` (.toml, .yaml), for the commands that read one; must be readable")
	pf.StringVar(&output, "output", "text", "output `format`: text, or json (one JSON document)")
	root.AddCommand(New(h))
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return exitOK
	}
	re := &runError{err: err, usage: true} // cobra's own errors are usage errors
	errors.As(err, &re)
	if (jsonOut || output == "json") && !wroteJSON {
		_ = writeJSON(map[string]any{"error": err.Error(), "exit_code": exitUsage})
	}
	fmt.Fprintf(stderr, "%s: %s\n", program, err)
	if re.usage && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return exitUsage
}

// CheckConfig fails when --config names a path that cannot be read (or
// is a directory); nil when path is "". core checks its --config with it
// too, so that both programs give one message.
func CheckConfig(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err == nil {
		var st os.FileInfo
		if st, err = f.Stat(); err == nil && st.IsDir() {
			err = errors.New("is a directory")
		}
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("--config %s: cannot read the config file: %w", path, unwrapPath(err))
	}
	return nil
}
