package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/cmd/internal/samlcmd"
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
	output   string // --output as given: a format, or (legacy) an artifact path

	// outputFormat is the resolved format, "text" or "json", set by setup
	// from --output or the command's --format.
	outputFormat string
	// legacyArtifact is an --output value that named a file on a command
	// that writes an artifact; artifactPath returns it.
	legacyArtifact string

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

The policy commands run in-process and need no sidecar; each command's help
says whether it reads --config or talks to the sidecar at --sidecar.

` + flagRule + `

Exit codes: 0 on success; 1 when a check fails (a wrong --expect, a failing
fixture, a lint error, a p99 over its threshold, an invalid bundle
signature) or the sidecar refused; 2 for a usage or input error (an unknown
flag, an unreadable --config, a missing directory, malformed JSON); 3 when
the sidecar could not be reached; 4 when the admin token would have gone
over plain http to a host that is not loopback (nothing was sent).`,
		Version:       version.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setup(cmd)
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("core {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError("%w", err) })

	pf := root.PersistentFlags()
	pf.StringVar(&a.sidecar, "sidecar", defaultSidecarURL(), "sidecar address (`url`); env "+envSidecarURL)
	pf.StringVar(&a.config, "config", "", "svc config file `path` (.toml, .yaml), for the commands that read one; must be readable")
	pf.StringVar(&a.logLevel, "log-level", "warn", "log `level`: error, warn, info or debug")
	pf.StringVar(&a.output, "output", "text", "output `format`: text, or json (one JSON document; one per line when streaming)")

	root.AddCommand(a.policyCommand(), inProcess(a.coverageCommand()), a.sidecarCommand(), a.configCommand(), a.logCommand(), a.traceCommand(), a.samlCommand(), a.devCommand(), a.deployCommand(), a.apiKeyCommand())
	return root
}

// setup validates the global flags and sets up logging.
func (a *app) setup(cmd *cobra.Command) error {
	level, ok := logLevels[a.logLevel]
	if !ok {
		return usageError("invalid --log-level %q: want error, warn, info or debug", a.logLevel)
	}
	if err := a.resolveFormat(cmd); err != nil {
		return err
	}
	if _, err := parseSidecarURL(a.sidecar, "--sidecar"); err != nil {
		return err
	}
	if err := a.checkConfig(); err != nil {
		return err
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
	// Flags and arguments may fail before setup resolved the format.
	if (a.json || a.format() == formatJSON || a.output == formatJSON) && !a.wroteJSON {
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

// The one flag rule of core, stated in core --help (flagRule) and
// docs/cli.md. Commands follow it through these helpers:
//
//   - --output text|json (global) chooses the format of what a command
//     reports. A command calls a.useJSON(...) once (passing its own
//     switches that also ask for JSON, such as --ci) and then writes either
//     text or a.writeJSON(v): one document for one-shot commands; streaming
//     ones pass the sidecar's compact JSON lines through, one per line.
//     a.format() returns the resolved "text" or "json".
//   - --format is a synonym of --output on the commands that register it
//     with a.formatFlag(cmd) (policy lint, policy bundle, log tail).
//   - --output never names a file. A command that writes an artifact
//     registers --out with a.artifactFlag(cmd, what) and reads the path
//     with a.artifactPath(cmd); on such a command an --output value that is
//     neither text nor json is taken as the path (the older spelling).
//   - --config: setup fails with exit 2, naming the path, when it is given
//     and cannot be read; commands that use it read a.configPath().
//   - --sidecar: every command that talks to the sidecar uses
//     a.sidecarClient() (client.go).
//   - --input is a JSON document: inline, or @path for a file's content (as
//     curl -d @file); a.readInput(flag, value) implements it. policy bench
//     also takes a plain path (readBenchInput), as the specification writes.
//   - Each runnable command says what it uses, with exactly one of
//     inProcess(cmd) (neither --config nor --sidecar; said in its help),
//     talksToSidecar(cmd) or readsConfig(cmd). A test checks every command.
const flagRule = `Flags mean the same on every command:
  --output text|json  the format of what the command reports: text (default)
                      or json, one JSON document on stdout (one JSON object
                      per line for streaming commands). --format is a
                      synonym on policy lint, policy bundle and log tail.
  --out <file>        where a command that writes an artifact (policy
                      bundle, saml metadata, saml test-assertion) writes it;
                      on these commands only, --output <file> (a value that
                      is neither text nor json) is accepted for --out.
  --input <json>      an input document: inline JSON, or @path to read a file
                      (as curl does); --input-file <path> is the same as
                      --input @path. policy bench also takes a plain path.
  --config <path>     an svc config file; a path that cannot be read is an
                      error (exit 2) on every command.
  --sidecar <url>     the sidecar of the commands that talk to one (default
                      $SVC_SIDECAR_URL, else http://localhost:7700).`

// Output formats of --output and --format.
const (
	formatText = "text"
	formatJSON = "json"
)

// Annotations a command carries; see artifactFlag, formatFlag, inProcess.
const (
	annotArtifact = "svc.core/artifact"
	annotFormat   = "svc.core/format"
	annotUses     = "svc.core/uses"
)

// resolveFormat sets outputFormat from --output and the command's
// --format, and legacyArtifact from an --output that names a file on an
// artifact command.
func (a *app) resolveFormat(cmd *cobra.Command) error {
	a.outputFormat = formatText
	out := a.output
	switch {
	case out == "" || out == formatText || out == formatJSON:
		if out != "" {
			a.outputFormat = out
		}
	case cmd.Annotations[annotArtifact] != "":
		a.legacyArtifact = out
	default:
		return usageError("invalid --output %q: want text or json (--output chooses the output format and never names a file; commands that write a file take --out <file>)", out)
	}
	if cmd.Annotations[annotFormat] == "" || !cmd.Flags().Changed("format") {
		return nil
	}
	f, _ := cmd.Flags().GetString("format")
	if f != formatText && f != formatJSON {
		return usageError("invalid --format %q: want text or json", f)
	}
	if cmd.Flags().Changed("output") && a.legacyArtifact == "" && out != f {
		return usageError("--format %s contradicts --output %s: give one of them", f, out)
	}
	a.outputFormat = f
	return nil
}

// format is the output format of the running command: "text" or "json".
func (a *app) format() string {
	if a.outputFormat == "" {
		return formatText
	}
	return a.outputFormat
}

// useJSON decides whether the running command writes JSON: with --output
// json (or --format json), or when one of the command's own switches (such
// as --ci) asks for it. Call it once at the start of RunE.
func (a *app) useJSON(local ...bool) bool {
	a.json = a.format() == formatJSON || slices.Contains(local, true)
	return a.json
}

// formatFlag registers --format on cmd as a synonym of --output.
func (a *app) formatFlag(cmd *cobra.Command) {
	cmd.Flags().String("format", "", "output `format`: text or json (synonym of --output)")
	setAnnotation(cmd, annotFormat, "true")
}

// artifactFlag registers --out on a command that writes an artifact
// (what names it in the help: "bundle"), and accepts --output <file> for
// it on this command.
func (a *app) artifactFlag(cmd *cobra.Command, what string) {
	cmd.Flags().String("out", "", "write the "+what+" to `file` (--output <file> is accepted too)")
	setAnnotation(cmd, annotArtifact, what)
}

// artifactPath is the file a command registered with artifactFlag writes:
// --out, or an --output value that is neither text nor json. It is a usage
// error to give neither, or both.
func (a *app) artifactPath(cmd *cobra.Command) (string, error) {
	out, _ := cmd.Flags().GetString("out")
	switch {
	case out != "" && a.legacyArtifact != "":
		return "", usageError("--out %s and --output %s both name the %s file: give only --out", out, a.legacyArtifact, cmd.Annotations[annotArtifact])
	case out != "":
		return out, nil
	case a.legacyArtifact != "":
		return a.legacyArtifact, nil
	}
	return "", usageError("give the %s file with --out <file> (--output text|json only chooses the output format)", cmd.Annotations[annotArtifact])
}

// configPath is the --config path, "" when not given. setup has already
// checked that it can be read.
func (a *app) configPath() string { return a.config }

// checkConfig fails with exit 2 when --config is given and cannot be read.
// The check and its message are those of svc-sidecar's saml commands.
func (a *app) checkConfig() error {
	if err := samlcmd.CheckConfig(a.config); err != nil {
		return inputError(err)
	}
	return nil
}

// inProcess marks cmd as one that uses neither --config nor --sidecar and
// says so in its help.
func inProcess(cmd *cobra.Command) *cobra.Command {
	cmd.Long = strings.TrimRight(cmd.Long, "\n") + "\n\nRuns in-process: uses neither --config nor --sidecar."
	setAnnotation(cmd, annotUses, "in-process")
	return cmd
}

// talksToSidecar marks cmd as one that talks to the sidecar at --sidecar.
func talksToSidecar(cmd *cobra.Command) *cobra.Command {
	setAnnotation(cmd, annotUses, "sidecar")
	return cmd
}

// readsConfig marks cmd as one that reads the --config file.
func readsConfig(cmd *cobra.Command) *cobra.Command {
	setAnnotation(cmd, annotUses, "config")
	return cmd
}

func setAnnotation(cmd *cobra.Command, key, value string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[key] = value
}

// readInput returns the JSON document an --input style flag gives: inline
// JSON, or the content of the file named after an @ (as curl -d @file).
// name is what error messages call the document: the flag, or the path.
func readInput(flag, value string) (name string, raw []byte, err error) {
	if path, ok := strings.CutPrefix(value, "@"); ok {
		if path == "" {
			return "", nil, usageError("--%s @ needs a file path after the @", flag)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return "", nil, inputError(fmt.Errorf("--%s @%s: %w", flag, path, unwrapPath(err)))
		}
		return path, raw, nil
	}
	trimmed := strings.TrimSpace(value)
	if trimmed == "" {
		return "", nil, usageError("--%s is empty: give the input as inline JSON, or @path to read a file", flag)
	}
	if c := trimmed[0]; c != '{' && c != '[' && c != '"' {
		if st, err := os.Stat(value); err == nil && !st.IsDir() {
			return "", nil, usageError("--%s takes inline JSON; to read the file %s write --%s @%s", flag, value, flag, value)
		}
	}
	return "--" + flag, []byte(value), nil
}

// readBenchInput reads the --input of policy bench, which the
// specification writes as --input <path>: a value that does not start as
// JSON and names a readable file is that file (a value that is JSON, such
// as 42, stays JSON); otherwise it is what
// readInput takes (inline JSON, or @path).
func readBenchInput(value string) (name string, raw []byte, err error) {
	trimmed := strings.TrimSpace(value)
	if trimmed == "" || strings.HasPrefix(value, "@") || strings.ContainsRune("{[\"", rune(trimmed[0])) || json.Valid([]byte(trimmed)) {
		return readInput("input", value)
	}
	st, err := os.Stat(value)
	if err != nil {
		return "", nil, inputError(fmt.Errorf("--input %s: not JSON, and not a readable file: %w", value, unwrapPath(err)))
	}
	if st.IsDir() {
		return "", nil, inputError(fmt.Errorf("--input %s: is a directory; give an input file (or inline JSON)", value))
	}
	raw, err = os.ReadFile(value)
	if err != nil {
		return "", nil, inputError(fmt.Errorf("--input %s: %w", value, unwrapPath(err)))
	}
	return value, raw, nil
}

// unwrapPath drops the "open <path>:" of an *fs.PathError, for messages
// that name the path themselves.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writeJSON writes v as the command's one JSON document.
func (a *app) writeJSON(v any) error {
	a.wroteJSON = true
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// group makes cmd a command group: without a subcommand it prints its
// help; an argument is a mistyped subcommand, a usage error (exit 2) with
// the subcommands it may have meant, never the help and exit 0 that a
// script would take for success.
func group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = samlcmd.GroupArgs(usageError)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return cmd
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
