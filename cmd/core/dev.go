package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/devissuer"
)

// devCommand groups what helps on a developer's machine.
func (a *app) devCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Development helpers: tokens a sidecar in development mode verifies",
	}
	cmd.AddCommand(inProcess(a.devTokenCommand()))
	return cmd
}

type devTokenFlags struct {
	roles           []string
	tenant, subject string
	email, dir      string
	ttl             time.Duration
}

// devTokenReport is the --output json answer of dev token.
type devTokenReport struct {
	Token     string    `json:"token"`
	Issuer    string    `json:"issuer"`
	Subject   string    `json:"subject"`
	Tenant    string    `json:"tenant"`
	Roles     []string  `json:"roles"`
	ExpiresAt time.Time `json:"expires_at"`
	Dir       string    `json:"dir"`
}

func (a *app) devTokenCommand() *cobra.Command {
	var f devTokenFlags
	cmd := &cobra.Command{
		Use:   "token --role <role> [--role <role>…] [--tenant <t>] [--subject <s>] [--ttl 1h]",
		Short: "Print an RS256 token of the local development issuer, which a sidecar in development mode verifies",
		Long: `Prints an RS256 JWT (iss "svc-dev") signed by the local development issuer,
whose key pair lives in --dir (default $SVC_DEV_ISSUER_DIR, else
~/.config/svc/dev-issuer); this command or svc-sidecar, whichever runs
first, creates it. A sidecar in development mode (no identity source
configured) verifies these tokens for real — a tampered or expired one is
refused — and treats any other bearer as the user anonymous. No other
sidecar trusts them.

The defaults match development mode's deployment tenant: --tenant dev
--subject dev-user. Roles are those your policy knows (the default policy:
viewer, editor, billing, admin).

  TOKEN=$(core dev token --role viewer)
  curl -s -XPOST localhost:7700/v1/authorize -H "Authorization: Bearer $TOKEN" -d '{"action":"orders:read"}'

Exit codes: 0 printed, 2 bad flags or an unusable --dir.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runDevToken(f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.roles, "role", nil, "a `role` of the user (repeat for several)")
	fl.StringVar(&f.tenant, "tenant", config.DevTenant, "the user's `tenant` id (tenant_id claim)")
	fl.StringVar(&f.subject, "subject", "dev-user", "the user's `id` (sub claim)")
	fl.StringVar(&f.email, "email", "", "the user's `email` (email claim), optional")
	fl.DurationVar(&f.ttl, "ttl", time.Hour, "lifetime of the token (at most 720h)")
	fl.StringVar(&f.dir, "dir", "", "`directory` of the development issuer's key pair (default $SVC_DEV_ISSUER_DIR, else ~/.config/svc/dev-issuer)")
	return cmd
}

func (a *app) runDevToken(f devTokenFlags) error {
	a.useJSON()
	if f.tenant == "" || f.subject == "" {
		return usageError("--tenant and --subject must not be empty")
	}
	if f.ttl <= 0 || f.ttl > devissuer.MaxTTL {
		return usageError("--ttl must be positive and at most %s", devissuer.MaxTTL)
	}
	dir := devissuer.Dir(f.dir, os.Getenv)
	d, created, err := devissuer.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return inputError(fmt.Errorf("--dir %s: %w", dir, err))
		}
		return inputError(err)
	}
	if created {
		fmt.Fprintf(a.stderr, "created the development issuer's key pair in %s\n", dir)
	}
	now := time.Now()
	tok, err := d.Sign(devissuer.Token{Subject: f.subject, Tenant: f.tenant, Roles: f.roles, Email: f.email, TTL: f.ttl}, now)
	if err != nil {
		return inputError(err)
	}
	if a.json {
		roles := f.roles
		if roles == nil {
			roles = []string{}
		}
		return a.writeJSON(devTokenReport{Token: tok, Issuer: devissuer.Issuer, Subject: f.subject, Tenant: f.tenant,
			Roles: roles, ExpiresAt: now.Add(f.ttl).Truncate(time.Second).UTC(), Dir: dir})
	}
	if len(f.roles) == 0 {
		fmt.Fprintln(a.stderr, "note: no --role given; the default policy allows nothing to a user without a role")
	}
	fmt.Fprintln(a.stdout, tok)
	return nil
}
