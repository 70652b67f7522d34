package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/devissuer"
	"github.com/svc-dev/svc/engine/loopback"
)

// devCommand groups what helps on a developer's machine.
func (a *app) devCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Development helpers: tokens a sidecar in development mode verifies",
	}
	group(cmd)
	cmd.AddCommand(inProcess(a.devTokenCommand()), inProcess(a.devJWKSCommand()))
	return cmd
}

func (a *app) devJWKSCommand() *cobra.Command {
	var dir, listen string
	cmd := &cobra.Command{
		Use:   "jwks [--listen <addr>]",
		Short: "Print, or serve, the development issuer's public key as a JWKS, for a sidecar outside development mode",
		Long: `Prints the development issuer's public key as a JSON Web Key Set, or with
--listen serves it at http://<addr>/jwks.json until interrupted: a second
sidecar, configured as in production (sdk.jwks_url, jwt.issuer = "svc-dev",
fail_mode = "closed"), then verifies the tokens of core dev token as it
would verify your identity provider's. The key pair is the one of
core dev token (--dir, $SVC_DEV_ISSUER_DIR, else ~/.config/svc/dev-issuer),
created when missing.

Exit codes: 0 printed (or served until interrupted), 2 bad flags, an
unusable --dir or an address that cannot be listened on.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runDevJWKS(cmd.Context(), dir, listen)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "`directory` of the development issuer's key pair (default $SVC_DEV_ISSUER_DIR, else ~/.config/svc/dev-issuer)")
	cmd.Flags().StringVar(&listen, "listen", "", "serve the set at http://`addr`/jwks.json instead of printing it (a loopback address, such as 127.0.0.1:8000)")
	return cmd
}

func (a *app) runDevJWKS(ctx context.Context, dir, listen string) error {
	if listen != "" {
		if host, _, err := net.SplitHostPort(listen); err != nil || !loopback.Host(host) {
			return usageError("--listen %q: want a loopback host:port, such as 127.0.0.1:8000", listen)
		}
	}
	dir = devissuer.Dir(dir, os.Getenv)
	d, created, err := devissuer.Open(dir)
	if err != nil {
		return inputError(err)
	}
	if created {
		fmt.Fprintf(a.stderr, "created the development issuer's key pair in %s\n", dir)
	}
	set, err := d.JWKS()
	if err != nil {
		return inputError(err)
	}
	if listen == "" {
		fmt.Fprintf(a.stdout, "%s\n", set)
		return nil
	}
	lis, err := net.Listen("tcp", listen)
	if err != nil {
		return inputError(fmt.Errorf("--listen %s: %w", listen, err))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(set)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(a.stderr, "serving the development issuer's JWKS at http://%s/jwks.json\n", lis.Addr())
	ctx, stop := interruptible(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	case err := <-done:
		return err
	}
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
