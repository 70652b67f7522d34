package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/apikey"
)

// apiKeyCommand groups the commands that edit an API-key file
// (api_keys.file).
func (a *app) apiKeyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api-key",
		Short: "Create, revoke and list the API keys of an api_keys.file",
	}
	group(cmd)
	cmd.AddCommand(inProcess(a.apiKeyCreateCommand()), inProcess(a.apiKeyRevokeCommand()), inProcess(a.apiKeyListCommand()))
	return cmd
}

func (a *app) apiKeyCreateCommand() *cobra.Command {
	var (
		file, tenant, subject string
		roles                 []string
		expires               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "create --file <file> --tenant <t> --subject <s> --role <role> [--role <role>…] [--expires 720h]",
		Short: "Create an API key: append its hash to the file and print the key",
		Long: `Creates an API key (svck_<id>_<secret>), appends its entry to --file (the
SHA-256 of the key, with the tenant, subject and roles it stands for; the
rest of the file is kept, and a missing file is created with mode 0600)
and prints the key alone on stdout, or {"id":...,"key":...} with
--output json. The key is printed once and stored nowhere: keep it.

A sidecar with api_keys.file set to the file re-reads it within seconds.

  KEY=$(core api-key create --file /etc/svc/api-keys.toml --tenant acme --subject ci --role admin)
  curl -s localhost:7700/check -H "X-Original-URI: /orders/1" -H "X_Svc_Method: GET" -H "X-Api-Key: $KEY"

Exit codes: 0 created, 2 bad flags or a file that cannot be read or
written, or does not parse.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.useJSON()
			if file == "" || tenant == "" || subject == "" {
				return usageError("--file, --tenant and --subject are required")
			}
			if expires < 0 {
				return usageError("--expires must not be negative")
			}
			e := apikey.NewEntry{Tenant: tenant, Subject: subject, Roles: roles}
			if expires > 0 {
				e.Expires = time.Now().Add(expires)
			}
			id, key, err := apikey.Append(file, e)
			if err != nil {
				return inputError(err)
			}
			if a.json {
				return a.writeJSON(struct {
					ID  string `json:"id"`
					Key string `json:"key"`
				}{id, key})
			}
			if len(roles) == 0 {
				fmt.Fprintln(a.stderr, "note: no --role given; the default policy allows nothing to a caller without a role")
			}
			fmt.Fprintln(a.stdout, key)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&file, "file", "", "the API-key `file` (api_keys.file)")
	fl.StringVar(&tenant, "tenant", "", "the caller's `tenant` id")
	fl.StringVar(&subject, "subject", "", "the caller's `id`, as a token's sub")
	fl.StringArrayVar(&roles, "role", nil, "a `role` of the caller (repeat for several)")
	fl.DurationVar(&expires, "expires", 0, "lifetime of the key, such as 720h (default: no expiry)")
	return cmd
}

func (a *app) apiKeyRevokeCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "revoke --file <file> <id>",
		Short: "Revoke an API key: mark its entry revoked = true",
		Long: `Marks the entry of <id> (the part of the key after "svck_", before the
next "_") revoked in --file, keeping the rest of the file. A sidecar with
api_keys.file set to the file refuses the key (api-key-revoked) once it
has re-read the file, within seconds.

Exit codes: 0 revoked (or revoked already), 2 bad flags, no such id, or a
file that cannot be read or written, or does not parse.`,
		Args: args("<id>"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if file == "" {
				return usageError("--file is required")
			}
			already, err := apikey.Revoke(file, argv[0])
			if err != nil {
				return inputError(err)
			}
			if already {
				fmt.Fprintf(a.stderr, "%s was revoked already\n", argv[0])
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the API-key `file` (api_keys.file)")
	return cmd
}

// apiKeyListed is one key of api-key list --output json: never its hash.
type apiKeyListed struct {
	ID      string     `json:"id"`
	Tenant  string     `json:"tenant"`
	Subject string     `json:"subject"`
	Roles   []string   `json:"roles"`
	Expires *time.Time `json:"expires,omitempty"`
	Revoked bool       `json:"revoked"`
}

func (a *app) apiKeyListCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "list --file <file>",
		Short: "List the API keys of a file: id, tenant, subject, roles, expiry, revocation",
		Long: `Lists the entries of --file: id, tenant, subject, roles, expires and
revoked, never their hashes; with --output json, one JSON array.

Exit codes: 0 listed, 2 bad flags or a file that cannot be read or does
not parse.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.useJSON()
			if file == "" {
				return usageError("--file is required")
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return inputError(err)
			}
			set, err := apikey.Parse(data)
			if err != nil {
				return inputError(fmt.Errorf("%s: %w", file, err))
			}
			listed := make([]apiKeyListed, 0, set.Len())
			for _, k := range set.Keys() {
				l := apiKeyListed{ID: k.ID, Tenant: k.Tenant, Subject: k.Subject, Roles: k.Roles, Revoked: k.Revoked}
				if !k.Expires.IsZero() {
					t := k.Expires.UTC()
					l.Expires = &t
				}
				listed = append(listed, l)
			}
			if a.json {
				return a.writeJSON(listed)
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tTENANT\tSUBJECT\tROLES\tEXPIRES\tREVOKED")
			for _, l := range listed {
				exp := "-"
				if l.Expires != nil {
					exp = l.Expires.Format(time.RFC3339)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%v\n", l.ID, l.Tenant, l.Subject, strings.Join(l.Roles, ","), exp, l.Revoked)
			}
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the API-key `file` (api_keys.file)")
	return cmd
}
