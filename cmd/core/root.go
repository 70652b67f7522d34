package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/version"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // a check failed: wrong --expect, failing fixture, lint error, p99 over threshold
	exitUsage  = 2 // usage or input error: unknown flag, missing directory, malformed JSON
)

// exitError is an error with the exit code it ends the program with.
// With quiet set, the command has already reported it on its output and
// nothing more is printed.
type exitError struct {
	code  int
	err   error
	quiet bool
	usage bool // a mistake in the command line: point to --help
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError is a mistake in the command line itself.
func usageError(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...), usage: true}
}

// inputError is input that cannot be used: a missing directory, a
// malformed file, a policy that does not compile.
func inputError(err error) error { return &exitError{code: exitUsage, err: err} }

// checkFailed is a check that ran and failed; the output already says
// how, so err is not printed again unless the output is JSON-free.
func checkFailed(err error, quiet bool) error {
	return &exitError{code: exitFailed, err: err, quiet: quiet}
}

// app holds what every command shares: the output streams and the global
// flags.
type app struct {
	stdout, stderr io.Writer

	sidecar  string
	config   string
	logLevel string
	output   string

	log *slog.Logger
	// json is set by a command that writes JSON; wroteJSON records that
	// it wrote its document, so that a failure after it does not add a
	// second one.
	json      bool
	wroteJSON bool
}

// NewRootCommand builds the core command tree writing to stdout and
// stderr. Execute is the usual way to run it.
func NewRootCommand(stdout, stderr io.Writer) *cobra.Command {
	return newApp(stdout, stderr).rootCommand()
}

// Execute runs core with args and returns the process exit code.
func Execute(args []string, stdout, stderr io.Writer) int {
	a := newApp(stdout, stderr)
	root := a.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	return a.exitCode(cmd, err)
}

func newApp(stdout, stderr io.Writer) *app {
	return &app{stdout: stdout, stderr: stderr, log: slog.New(slog.DiscardHandler)}
}

var logLevels = map[string]slog.Level{
	"error": slog.LevelError, "warn": slog.LevelWarn, "info": slog.LevelInfo, "debug": slog.LevelDebug,
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "core",
		Short: "Test, lint, benchmark, bundle and measure svc authorization policies",
		Long: `core works with the Rego policies of the svc authorization sidecar.

The policy commands run in-process and need no sidecar. Exit codes: 0 on
success, 1 when a check fails (a wrong --expect, a failing fixture, a lint
error, a p99 over its threshold, an invalid bundle signature), 2 for a usage
or input error (an unknown flag, a missing directory, malformed JSON).`,
		Version:       version.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setup()
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("core {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError("%w", err) })

	pf := root.PersistentFlags()
	pf.StringVar(&a.sidecar, "sidecar", defaultSidecarURL(), "sidecar address (`url`); env "+envSidecarURL)
	pf.StringVar(&a.config, "config", "", "config file `path`")
	pf.StringVar(&a.logLevel, "log-level", "warn", "log `level`: error, warn, info or debug")
	pf.StringVar(&a.output, "output", "", "output `format`: json for one machine-readable JSON document")

	root.AddCommand(a.policyCommand(), a.coverageCommand())
	return root
}

// setup validates the global flags and sets up logging.
func (a *app) setup() error {
	level, ok := logLevels[a.logLevel]
	if !ok {
		return usageError("invalid --log-level %q: want error, warn, info or debug", a.logLevel)
	}
	if a.output != "" && a.output != "json" {
		return usageError("invalid --output %q: the only output format is json", a.output)
	}
	u, err := url.Parse(a.sidecar)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError("invalid --sidecar %q: want an http or https URL such as http://localhost:7700", a.sidecar)
	}
	a.log = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
	return nil
}

// exitCode reports err on stderr (and, in JSON mode, as the JSON document
// when the command wrote none) and returns the exit code for it.
func (a *app) exitCode(cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	// cobra's own errors (unknown command, missing flags) are usage errors.
	ee := &exitError{code: exitUsage, err: err, usage: true}
	errors.As(err, &ee)
	if (a.json || a.output == "json") && !a.wroteJSON {
		_ = a.writeJSON(map[string]any{"error": err.Error(), "exit_code": ee.code})
	}
	if !ee.quiet {
		fmt.Fprintf(a.stderr, "core: %s\n", err)
		if ee.usage && cmd != nil {
			fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return ee.code
}

// useJSON decides whether the running command writes JSON: with --output
// json, or when one of the command's own switches (--format json, --ci)
// asks for it.
func (a *app) useJSON(local ...bool) bool {
	a.json = a.output == "json" || slices.Contains(local, true)
	return a.json
}

// writeJSON writes v as the command's one JSON document.
func (a *app) writeJSON(v any) error {
	a.wroteJSON = true
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// args checks the positional arguments: exactly the names given.
func args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) == len(names) {
			return nil
		}
		if len(got) < len(names) {
			return usageError("%s needs the argument %s", cmd.CommandPath(), strings.Join(names[len(got):], " "))
		}
		return usageError("%s takes %d argument(s), got unexpected argument %q", cmd.CommandPath(), len(names), got[len(names)])
	}
}
