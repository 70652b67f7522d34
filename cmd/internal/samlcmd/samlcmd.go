// Package samlcmd holds the `saml metadata` and `saml test-assertion`
// commands, mounted by both core and svc-sidecar so that the two programs
// take the same flags and print the same output.
//
// A program mounts them with New and a Host, which supplies the global
// flags (--config, --output) and its own error values, so that each program
// keeps its exit codes; Run is a complete host for a program that has no
// cobra command tree of its own (svc-sidecar).
package samlcmd

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// The local test IdP: its entity id and a sign-on URL that nothing serves
// (assertions come from test-assertion, not from a browser flow).
const (
	TestIdPEntityID = "urn:svc:saml:test-idp"
	testIdPSSOURL   = "http://127.0.0.1/svc-test-idp/sso"
)

// Host is what the commands take from the program that mounts them.
type Host struct {
	// Stdout and Stderr receive the artifact (or report) and the notes.
	Stdout, Stderr io.Writer
	// ConfigPath returns the --config path, "" when none was given.
	ConfigPath func() string
	// JSON reports whether --output json was chosen; the commands then
	// write a JSON report instead of the artifact itself.
	JSON func() bool
	// WriteJSON writes v as the command's one JSON document.
	WriteJSON func(v any) error
	// LegacyArtifact returns an --output value that named a file (the
	// older spelling of --out), "" when there is none.
	LegacyArtifact func() string
	// UsageError is a mistake in the command line; InputError is input
	// that cannot be used (an unreadable config, no [sdk.saml] table).
	UsageError func(format string, args ...any) error
	InputError func(err error) error
	// Mark, when set, is called on each runnable command with the name of
	// the artifact it writes ("metadata", "response"), for the host to
	// annotate it.
	Mark func(cmd *cobra.Command, artifact string)
}

// New returns the saml command group with its metadata and test-assertion
// commands.
func New(h Host) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "saml",
		Short: "SAML service-provider metadata and signed test assertions",
		Args:  GroupArgs(h.UsageError),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(h.metadataCommand(), h.testAssertionCommand())
	return cmd
}

// GroupArgs is the Args of a command group, which runs nothing itself:
// an argument is a mistyped subcommand, refused as a usage error with the
// subcommands it may have meant.
func GroupArgs(usage func(format string, args ...any) error) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", got[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's own default
		}
		if s := cmd.SuggestionsFor(got[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usage("%s", msg)
	}
}

// args accepts no positional argument.
func (h Host) args() cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) == 0 {
			return nil
		}
		return h.UsageError("%s takes 0 argument(s), got unexpected argument %q", cmd.CommandPath(), got[0])
	}
}

// artifactFlag registers --out and lets the host mark the command.
func (h Host) artifactFlag(cmd *cobra.Command, what string) {
	cmd.Flags().String("out", "", "write the "+what+" to `file` (--output <file> is accepted too)")
	if h.Mark != nil {
		h.Mark(cmd, what)
	}
}

// samlConfig loads --config (or ./svc.toml) with the SVC_* environment, as
// svc-sidecar does, and returns its [sdk.saml] table.
func (h Host) samlConfig(hint string) (*config.SAML, error) {
	path := h.ConfigPath()
	if path == "" {
		if _, err := os.Stat("svc.toml"); err == nil {
			path = "svc.toml"
		}
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		return nil, h.InputError(err)
	}
	if cfg.SDK.SAML == nil {
		where := path
		if where == "" {
			where = "the environment (no --config, no ./svc.toml)"
		}
		return nil, h.InputError(fmt.Errorf("%s has no [sdk.saml] table: %sgive --config a file with one", where, hint))
	}
	return cfg.SDK.SAML, nil
}

// writeArtifact writes data to the --out (or --output <file>) path when
// one is given, else to stdout; with --output json the report is JSON.
func (h Host) writeArtifact(cmd *cobra.Command, data []byte, report map[string]any) error {
	out, _ := cmd.Flags().GetString("out")
	legacy := h.LegacyArtifact()
	if out == "" {
		out = legacy
	}
	if out != "" && legacy != "" && out != legacy {
		return h.UsageError("--out %s and --output %s both name the file: give only --out", out, legacy)
	}
	if out != "" {
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return h.InputError(fmt.Errorf("--out %s: %w", out, unwrapPath(err)))
		}
		report["file"] = out
		if h.JSON() {
			return h.WriteJSON(report)
		}
		fmt.Fprintf(h.Stderr, "wrote %s\n", out)
		return nil
	}
	if h.JSON() {
		return h.WriteJSON(report)
	}
	_, err := h.Stdout.Write(data)
	return err
}

func (h Host) metadataCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "metadata [--out <file>]",
		Short: "Print (or write) the SP metadata XML of the [sdk.saml] configuration",
		Long: `Renders the service provider's metadata from --config (default ./svc.toml) and
the SVC_* environment: entity id, the HTTP-POST assertion consumer service URL,
NameID format emailAddress, and the SP certificate when an SP key pair is
configured. Give it to the identity provider. Written to --out <file>
(--output <file> is accepted too), else to stdout.`,
		Args: h.args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := h.samlConfig("")
			if err != nil {
				return err
			}
			md, err := samlgw.SPMetadata(*s)
			if err != nil {
				return h.InputError(err)
			}
			return h.writeArtifact(cmd, md, map[string]any{"entity_id": s.EntityID, "acs_url": s.ACSURL, "metadata": string(md)})
		},
	}
	h.artifactFlag(cmd, "metadata")
	return cmd
}

type testAssertionFlags struct {
	email, tenant, dir, entityID, acsURL string
	roles                                []string
	ttl                                  time.Duration
	metadata                             bool
}

func (h Host) testAssertionCommand() *cobra.Command {
	var f testAssertionFlags
	cmd := &cobra.Command{
		Use:   "test-assertion --email <email> --role <role> --tenant <tenant> [--out <file>]",
		Short: "Sign a SAMLResponse with a local test IdP, ready to POST to the ACS",
		Long: `Builds a SAMLResponse for --email (NameID and e-mail attribute) with the
--role values and the --tenant attribute, addressed to the [sdk.saml] of
--config (audience entity_id, recipient and destination acs_url; --entity-id
and --acs-url override them), signs its assertion with the key pair of a local
test IdP (RSA-2048, SHA-256) and prints it base64-encoded, ready to POST as the
SAMLResponse form field. The response answers no request, so the SP must have
allow_idp_initiated = true.

The test IdP's key pair lives in --idp-dir (created on first use). With
--metadata the command prints that IdP's metadata instead: give the file to
sdk.saml.idp_metadata_file and the sidecar trusts these assertions without
SVC_ENV=development. Written to --out <file> (--output <file> is accepted
too), else to stdout.`,
		Args: h.args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return h.runTestAssertion(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.email, "email", "", "the user's `email` (NameID)")
	fl.StringArrayVar(&f.roles, "role", nil, "a `role` (repeat for several)")
	fl.StringVar(&f.tenant, "tenant", "", "the user's `tenant` id")
	fl.StringVar(&f.dir, "idp-dir", "", "`directory` of the test IdP key pair (default $XDG_CONFIG_HOME/svc/saml-test-idp, else ~/.config/svc/saml-test-idp)")
	fl.StringVar(&f.entityID, "entity-id", "", "SP entity id (default: sdk.saml.entity_id)")
	fl.StringVar(&f.acsURL, "acs-url", "", "ACS URL (default: sdk.saml.acs_url)")
	fl.DurationVar(&f.ttl, "ttl", 5*time.Minute, "validity of the assertion")
	fl.BoolVar(&f.metadata, "metadata", false, "print the test IdP's metadata instead of an assertion")
	h.artifactFlag(cmd, "response")
	return cmd
}

// DefaultTestIdPDir is the default --idp-dir: svc/saml-test-idp in the
// user's configuration directory.
func DefaultTestIdPDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "svc", "saml-test-idp")
	}
	return ".svc-saml-test-idp"
}

func (h Host) runTestAssertion(cmd *cobra.Command, f testAssertionFlags) error {
	if !cmd.Flags().Changed("idp-dir") {
		f.dir = DefaultTestIdPDir()
	}
	if f.dir == "" {
		return h.UsageError("--idp-dir is empty")
	}
	// What the assertion needs is checked before the key pair is made,
	// so that a command that cannot succeed leaves nothing behind.
	entity, acs := f.entityID, f.acsURL
	mapping := config.AttributeMapping{Email: config.DefaultSAMLEmailAttribute, Role: config.DefaultSAMLRoleAttribute, Tenant: config.DefaultSAMLTenantAttribute}
	if !f.metadata {
		if f.email == "" || f.tenant == "" {
			return h.UsageError("--email and --tenant are required (or --metadata)")
		}
		if f.ttl <= 0 {
			return h.UsageError("--ttl must be positive")
		}
		if entity == "" || acs == "" {
			s, err := h.samlConfig("give --entity-id and --acs-url, or ")
			if err != nil {
				return err
			}
			if entity == "" {
				entity = s.EntityID
			}
			if acs == "" {
				acs = s.ACSURL
			}
			mapping = s.AttributeMapping
		}
	}
	idp, created, err := testidp.LoadOrCreate(f.dir, TestIdPEntityID, testIdPSSOURL)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return h.InputError(fmt.Errorf("--idp-dir %s: %w", f.dir, err))
		}
		return h.InputError(fmt.Errorf("test IdP in %s: %w", f.dir, err))
	}
	if created {
		fmt.Fprintf(h.Stderr, "created a test IdP key pair in %s\n", f.dir)
	}
	if f.metadata {
		md := idp.Metadata()
		return h.writeArtifact(cmd, md, map[string]any{"idp_entity_id": TestIdPEntityID, "idp_dir": f.dir, "metadata": string(md)})
	}
	now := time.Now().UTC()
	r := testidp.Response{
		Destination: acs, Recipient: acs, Audience: entity, NameID: f.email,
		IssueInstant: now, NotBefore: now.Add(-time.Minute), NotOnOrAfter: now.Add(f.ttl),
		Attributes: []testidp.Attribute{
			{Name: mapping.Email, Values: []string{f.email}},
			{Name: mapping.Tenant, Values: []string{f.tenant}},
		},
	}
	if len(f.roles) > 0 {
		r.Attributes = append(r.Attributes, testidp.Attribute{Name: mapping.Role, Values: f.roles})
	}
	doc, err := idp.Sign(r)
	if err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	b64 := base64.StdEncoding.EncodeToString(doc)
	return h.writeArtifact(cmd, []byte(b64+"\n"), map[string]any{
		"saml_response": b64, "audience": entity, "acs_url": acs, "idp_entity_id": TestIdPEntityID,
		"expires_at": r.NotOnOrAfter.Format(time.RFC3339),
	})
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
