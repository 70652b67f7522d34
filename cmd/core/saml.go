package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// The local test IdP: its entity id and a sign-on URL that nothing serves
// (assertions come from test-assertion, not from a browser flow).
const (
	testIdPEntityID = "urn:svc:saml:test-idp"
	testIdPSSOURL   = "http://127.0.0.1/svc-test-idp/sso"
)

func (a *app) samlCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "saml",
		Short: "SAML service-provider metadata and signed test assertions",
		Args:  args(),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(readsConfig(a.samlMetadataCommand()), readsConfig(a.samlTestAssertionCommand()))
	return cmd
}

// samlConfig loads --config (or ./svc.toml) with the SVC_* environment, as
// svc-sidecar does, and returns its [sdk.saml] table.
func (a *app) samlConfig() (*config.SAML, error) {
	path := a.configPath()
	if path == "" {
		if _, err := os.Stat("svc.toml"); err == nil {
			path = "svc.toml"
		}
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		return nil, inputError(err)
	}
	if cfg.SDK.SAML == nil {
		where := path
		if where == "" {
			where = "the environment (no --config, no ./svc.toml)"
		}
		return nil, inputError(fmt.Errorf("%s has no [sdk.saml] table", where))
	}
	return cfg.SDK.SAML, nil
}

// writeArtifact writes data to the --out (or --output <file>) path when
// one is given, else to stdout; with --output json the report is JSON.
func (a *app) writeArtifact(cmd *cobra.Command, data []byte, report map[string]any) error {
	out, _ := cmd.Flags().GetString("out")
	if out == "" {
		out = a.legacyArtifact
	}
	if out != "" && a.legacyArtifact != "" && out != a.legacyArtifact {
		return usageError("--out %s and --output %s both name the file: give only --out", out, a.legacyArtifact)
	}
	if out != "" {
		if err := os.WriteFile(out, data, 0o644); err != nil {
			return inputError(fmt.Errorf("--out %s: %w", out, unwrapPath(err)))
		}
		report["file"] = out
		if a.useJSON() {
			return a.writeJSON(report)
		}
		fmt.Fprintf(a.stderr, "wrote %s\n", out)
		return nil
	}
	if a.useJSON() {
		return a.writeJSON(report)
	}
	_, err := a.stdout.Write(data)
	return err
}

func (a *app) samlMetadataCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "metadata [--out <file>]",
		Short: "Print (or write) the SP metadata XML of the [sdk.saml] configuration",
		Long: `Renders the service provider's metadata from --config (default ./svc.toml) and
the SVC_* environment: entity id, the HTTP-POST assertion consumer service URL,
NameID format emailAddress, and the SP certificate when an SP key pair is
configured. Give it to the identity provider. Written to --out <file>
(--output <file> is accepted too), else to stdout.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := a.samlConfig()
			if err != nil {
				return err
			}
			md, err := samlgw.SPMetadata(*s)
			if err != nil {
				return inputError(err)
			}
			return a.writeArtifact(cmd, md, map[string]any{"entity_id": s.EntityID, "acs_url": s.ACSURL, "metadata": string(md)})
		},
	}
	a.artifactFlag(cmd, "metadata")
	return cmd
}

type testAssertionFlags struct {
	email, tenant, dir, entityID, acsURL string
	roles                                []string
	ttl                                  time.Duration
	metadata                             bool
}

func (a *app) samlTestAssertionCommand() *cobra.Command {
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
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runTestAssertion(cmd, f) },
	}
	def := defaultTestIdPDir()
	fl := cmd.Flags()
	fl.StringVar(&f.email, "email", "", "the user's `email` (NameID)")
	fl.StringArrayVar(&f.roles, "role", nil, "a `role` (repeat for several)")
	fl.StringVar(&f.tenant, "tenant", "", "the user's `tenant` id")
	fl.StringVar(&f.dir, "idp-dir", def, "`directory` of the test IdP key pair")
	fl.StringVar(&f.entityID, "entity-id", "", "SP entity id (default: sdk.saml.entity_id)")
	fl.StringVar(&f.acsURL, "acs-url", "", "ACS URL (default: sdk.saml.acs_url)")
	fl.DurationVar(&f.ttl, "ttl", 5*time.Minute, "validity of the assertion")
	fl.BoolVar(&f.metadata, "metadata", false, "print the test IdP's metadata instead of an assertion")
	a.artifactFlag(cmd, "response")
	return cmd
}

func defaultTestIdPDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "svc", "saml-test-idp")
	}
	return ".svc-saml-test-idp"
}

func (a *app) runTestAssertion(cmd *cobra.Command, f testAssertionFlags) error {
	if f.dir == "" {
		return usageError("--idp-dir is empty")
	}
	idp, created, err := testidp.LoadOrCreate(f.dir, testIdPEntityID, testIdPSSOURL)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return inputError(fmt.Errorf("--idp-dir %s: %w", f.dir, err))
		}
		return inputError(fmt.Errorf("test IdP in %s: %w", f.dir, err))
	}
	if created {
		fmt.Fprintf(a.stderr, "created a test IdP key pair in %s\n", f.dir)
	}
	if f.metadata {
		md := idp.Metadata()
		return a.writeArtifact(cmd, md, map[string]any{"idp_entity_id": testIdPEntityID, "idp_dir": f.dir, "metadata": string(md)})
	}
	if f.email == "" || f.tenant == "" {
		return usageError("--email and --tenant are required (or --metadata)")
	}
	if f.ttl <= 0 {
		return usageError("--ttl must be positive")
	}
	entity, acs := f.entityID, f.acsURL
	mapping := config.AttributeMapping{Email: config.DefaultSAMLEmailAttribute, Role: config.DefaultSAMLRoleAttribute, Tenant: config.DefaultSAMLTenantAttribute}
	if entity == "" || acs == "" {
		s, err := a.samlConfig()
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
	return a.writeArtifact(cmd, []byte(b64+"\n"), map[string]any{
		"saml_response": b64, "audience": entity, "acs_url": acs, "idp_entity_id": testIdPEntityID,
		"expires_at": r.NotOnOrAfter.Format(time.RFC3339),
	})
}
