package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/nginxconf"
	"github.com/svc-dev/svc/internal/startcheck"
	"github.com/svc-dev/svc/wire"
)

// pathConfig is the sidecar's live configuration (TOML).
const pathConfig = wire.PathConfig

// exitDiffTrouble is config diff's exit code for any error, as diff(1).
const exitDiffTrouble = 2

func (a *app) configCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Validate svc configuration files and compare them with each other or a live sidecar",
	}
	group(cmd)
	cmd.AddCommand(inProcess(a.configValidateCommand()), talksToSidecar(a.configDiffCommand()))
	return cmd
}

// configProblem is one error of `config validate --output json`.
type configProblem struct {
	Source  string `json:"source,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
	Text    string `json:"text"`
}

type validateReport struct {
	File     string          `json:"file"`
	Valid    bool            `json:"valid"`
	Keys     int             `json:"keys"`
	Warnings []string        `json:"warnings"`
	Errors   []configProblem `json:"errors"`
}

func (a *app) configValidateCommand() *cobra.Command {
	var nginxConf string
	cmd := &cobra.Command{
		Use:   "validate <file>",
		Short: "Check a config file (TOML or YAML): syntax, unknown keys, values; count keys, warn on default rate limits",
		Long: `Checks a configuration file as svc-sidecar reads it (.toml, or .yaml/.yml of
the same shape), without the SVC_* environment: syntax errors and unknown keys
with file:line, and values that cannot work, each naming its key. It prints
the number of keys the file sets ("N keys") and warnings: every tenant under
[tenants] without rate_limit.per_tenant.<tenant>, and an unset
rate_limit.default_rpm, with the 1000 rpm default that then applies.

A file without such errors is then checked as svc-sidecar checks it at start,
with the same functions: the policy set (policy.dir, or the embedded default)
loads and compiles, and the TLS, SAML key and metadata files it names exist
and parse. Relative paths resolve against the file's directory, as the
sidecar resolves them. What only a running sidecar meets (an address in use,
an identity provider or Redis out of reach) is not checked.

With --nginx-config, it also reads the nginx configuration in front of the
sidecar's /check, and counts as errors (with file:line) what lets a client
choose the method a request is judged as, or gets every check refused:
underscores_in_headers on and ignore_invalid_headers off (nginx then passes
a client's X_Svc_Method on), and an auth_request in a file that sets
X_Svc_Method nowhere (400 method-untrusted). When the sidecar reads client
certificates from this nginx ([client_certs] trust_domains and
sidecar.trusted_proxies), an auth_request in a file that sets
X-Forwarded-Client-Cert nowhere is an error too: nginx passes a client's
own header on, and the client would be taken for the workload it names.
So is ssl_verify_client optional_no_ca in a file that passes the client's
certificate on in X-Forwarded-Client-Cert and reads $ssl_client_verify
nowhere: nginx lets a self-signed certificate through, naming any workload.
Files it includes are not read.

Exit codes: 0 valid, 1 invalid, 2 a file cannot be read.`,
		Args: args("<file>"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.runConfigValidate(argv[0], nginxConf)
		},
	}
	cmd.Flags().StringVar(&nginxConf, "nginx-config", "", "also check the nginx configuration `file` in front of /check")
	return cmd
}

// startProblems runs on the file at path what svc-sidecar checks at start
// (startcheck.Run: the policy set loads and compiles, key and
// certificate files exist and parse), relative paths resolved against the
// file's directory as the sidecar resolves them.
func startProblems(path string) []configProblem {
	cfg, err := config.ReadFile(path)
	if err == nil {
		err = startcheck.Run(cfg, os.Getenv)
	}
	if err == nil {
		return nil
	}
	p := configProblem{Message: err.Error(), Text: err.Error()}
	var se *engine.SettingError
	if errors.As(err, &se) {
		p.Key, p.Message = se.Key, se.Msg
	}
	if ce := config.Errors(err); len(ce) > 0 {
		e := ce[0]
		p = configProblem{Source: e.Source, Line: e.Line, Column: e.Column, Key: e.Key, Message: e.Msg, Text: e.Error()}
	}
	return []configProblem{p}
}

// nginxProblems reads the nginx configuration at path, in front of the
// sidecar configured by the file at configPath, and returns its findings
// as validate's errors.
func nginxProblems(path, configPath string) ([]configProblem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, inputError(fmt.Errorf("%s: cannot read: %w", path, unwrapPath(err)))
	}
	var sc nginxconf.Sidecar
	if cfg, err := config.ReadFile(configPath); err == nil {
		sc.ReadsClientCert = len(cfg.ClientCerts.TrustDomains) > 0 && len(cfg.Sidecar.TrustedProxies) > 0
	}
	var out []configProblem
	for _, f := range nginxconf.Lint(data, sc) {
		e := &config.Error{Source: path, Line: f.Line, Key: f.Directive, Msg: f.Msg}
		out = append(out, configProblem{Source: path, Line: f.Line, Key: f.Directive, Message: f.Msg, Text: e.Error()})
	}
	return out, nil
}

func (a *app) runConfigValidate(path, nginxConf string) error {
	a.useJSON()
	format, err := config.FormatOf(path)
	if err != nil {
		return inputError(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return inputError(fmt.Errorf("%s: cannot read: %w", path, unwrapPath(err)))
	}
	rep, err := config.Inspect(data, format, path)
	out := validateReport{File: path, Valid: err == nil, Keys: rep.KeyCount, Warnings: rep.Warnings, Errors: []configProblem{}}
	if out.Warnings == nil {
		out.Warnings = []string{}
	}
	for _, e := range config.Errors(err) {
		out.Errors = append(out.Errors, configProblem{Source: e.Source, Line: e.Line, Column: e.Column, Key: e.Key, Message: e.Msg, Text: e.Error()})
	}
	if err != nil && len(out.Errors) == 0 {
		out.Errors = append(out.Errors, configProblem{Message: err.Error(), Text: err.Error()})
	}
	if err == nil {
		out.Errors = append(out.Errors, startProblems(path)...)
		out.Valid = len(out.Errors) == 0
	}
	if nginxConf != "" {
		problems, err := nginxProblems(nginxConf, path)
		if err != nil {
			return err
		}
		out.Errors = append(out.Errors, problems...)
		out.Valid = out.Valid && len(problems) == 0
	}
	if a.json {
		if err := a.writeJSON(out); err != nil {
			return err
		}
	} else {
		for _, p := range out.Errors {
			fmt.Fprintf(a.stdout, "error: %s\n", p.Text)
		}
		for _, w := range out.Warnings {
			fmt.Fprintf(a.stdout, "warning: %s\n", w)
		}
		verdict := "valid"
		if !out.Valid {
			verdict = "invalid, " + plural(len(out.Errors), "error")
		}
		fmt.Fprintf(a.stdout, "%s: %s, %s, %s\n", path, verdict, plural(out.Keys, "key"), plural(len(out.Warnings), "warning"))
	}
	if !out.Valid {
		return checkFailed(fmt.Errorf("%s is not a valid configuration", path), true)
	}
	return nil
}

type diffReport struct {
	A           string              `json:"a"`
	B           string              `json:"b"`
	Equal       bool                `json:"equal"`
	Differences []config.Difference `json:"differences"`
}

func (a *app) configDiffCommand() *cobra.Command {
	var live string
	cmd := &cobra.Command{
		Use:   "diff <file> [<other-file> | --live <sidecar-url>]",
		Short: "Compare a config file with another one or with a running sidecar's configuration, key by key",
		Long: `Compares the effective configuration of <file> (defaults applied, no SVC_*
environment) with <other-file>, or with the live configuration of the sidecar
at --live (GET /v1/config, which includes its environment overrides). A TOML
file and its YAML twin are equal. Each differing key is printed with both
values; URL user information and query values show as REDACTED, and the
configuration never holds secrets, only the paths of the files that do.

Exit codes, as diff(1): 0 equal, 1 different, 2 any trouble (an unreadable or
invalid file, a sidecar that cannot be reached or refuses).`,
		Args: func(cmd *cobra.Command, argv []string) error {
			if live != "" {
				return args("<file>")(cmd, argv)
			}
			if len(argv) == 1 {
				return usageError("%s needs <other-file> or --live <sidecar-url>", cmd.CommandPath())
			}
			return args("<file>", "<other-file>")(cmd, argv)
		},
		RunE: func(cmd *cobra.Command, argv []string) error {
			err := a.runConfigDiff(cmd.Context(), argv, live)
			var ee *exitError
			if errors.As(err, &ee) && ee.code != exitFailed {
				ee.code = exitDiffTrouble
			} else if err != nil && !errors.As(err, &ee) {
				err = &exitError{code: exitDiffTrouble, err: err}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&live, "live", "", "compare with the live configuration of the sidecar at `url`")
	return cmd
}

func (a *app) runConfigDiff(ctx context.Context, argv []string, live string) error {
	a.useJSON()
	left, err := readConfigFile(argv[0])
	if err != nil {
		return err
	}
	var right config.Config
	rightName := ""
	if live != "" {
		if right, err = a.liveConfig(ctx, live); err != nil {
			return err
		}
		rightName = "live " + live
	} else {
		if right, err = readConfigFile(argv[1]); err != nil {
			return err
		}
		rightName = argv[1]
	}
	diffs := config.Diff(left, right)
	rep := diffReport{A: argv[0], B: rightName, Equal: len(diffs) == 0, Differences: diffs}
	if rep.Differences == nil {
		rep.Differences = []config.Difference{}
	}
	if a.json {
		if err := a.writeJSON(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "--- %s\n+++ %s\n", rep.A, rep.B)
		for _, d := range diffs {
			if d.A != nil {
				fmt.Fprintf(a.stdout, "-%s = %s\n", d.Key, *d.A)
			}
			if d.B != nil {
				fmt.Fprintf(a.stdout, "+%s = %s\n", d.Key, *d.B)
			}
			if d.Redacted {
				fmt.Fprintf(a.stdout, " %s: the values differ in redacted parts\n", d.Key)
			}
		}
		if rep.Equal {
			fmt.Fprintln(a.stdout, "equal")
		} else {
			verb := "differ"
			if len(diffs) == 1 {
				verb = "differs"
			}
			fmt.Fprintf(a.stdout, "%s %s\n", plural(len(diffs), "key"), verb)
		}
	}
	if !rep.Equal {
		return checkFailed(errors.New("the configurations differ"), true)
	}
	return nil
}

// readConfigFile parses a config file with defaults applied; any problem
// is an input error.
func readConfigFile(path string) (config.Config, error) {
	c, err := config.ReadFile(path)
	if err != nil {
		return config.Config{}, inputError(err)
	}
	return c, nil
}

// liveConfig fetches GET /v1/config from the sidecar at base through the
// shared client.
func (a *app) liveConfig(ctx context.Context, base string) (config.Config, error) {
	c, err := a.sidecarClientAt(base, "--live")
	if err != nil {
		return config.Config{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	resp, err := c.Do(ctx, http.MethodGet, pathConfig, nil, "")
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return config.Config{}, c.unreachable(fmt.Errorf("no answer within %s", statusTimeout))
		}
		return config.Config{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return config.Config{}, c.unreachable(err)
	}
	u, _ := url.JoinPath(base, pathConfig)
	cfg, err := config.Parse(data, config.FormatTOML, u)
	if err != nil {
		return config.Config{}, fmt.Errorf("live configuration of %s does not parse: %w", base, err)
	}
	return cfg, nil
}
