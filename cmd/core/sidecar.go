package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"
)

// Paths of the sidecar's local HTTP API that the sidecar commands use.
const (
	pathStatus       = "/v1/status"
	pathReloadPolicy = "/v1/policy/reload"
)

// statusTimeout bounds one status request; uploadTimeout one bundle
// upload (compiling a large bundle takes a moment).
const (
	statusTimeout = 10 * time.Second
	uploadTimeout = 2 * time.Minute
)

func (a *app) sidecarCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sidecar",
		Short: "Operate a running svc-sidecar: status, restart, reload-policy",
		Long: `Commands that talk to a running svc-sidecar over its local HTTP API
(--sidecar, default SVC_SIDECAR_URL or http://localhost:7700). Callers that
are not on loopback send the admin token read from the file named by
SVC_ADMIN_TOKEN_FILE.

Exit codes: 0 ok, 1 the sidecar refused (a wrong or missing bundle
signature, an older revision), 2 usage or input error (an unreadable
bundle file), 3 the sidecar could not be reached.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(talksToSidecar(a.sidecarStatusCommand()), talksToSidecar(a.reloadPolicyCommand()))
	return cmd
}

// sidecarStatus is the part of GET /v1/status that `sidecar status`
// prints as text; --output json passes the whole document through.
type sidecarStatus struct {
	Status           string     `json:"status"`
	Reason           string     `json:"reason"`
	Ready            bool       `json:"ready"`
	Partitioned      bool       `json:"partitioned"`
	PartitionedSince *time.Time `json:"partitioned_since"`
	LastSync         *time.Time `json:"last_sync"`
	CacheValid       bool       `json:"cache_valid"`
	CacheAge         string     `json:"cache_age"`
	PoliciesLoaded   int        `json:"policies_loaded"`
	PolicyRevision   string     `json:"policy_revision"`
	PolicySource     string     `json:"policy_source"`
	PolicyMode       string     `json:"policy_mode"`
	JWKSKeySets      int        `json:"jwks_key_sets_cached"`
	Uptime           string     `json:"uptime"`
	Version          string     `json:"version"`
}

func (a *app) sidecarStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Print the sidecar's health, partition state, caches, policies, uptime and version",
		Long: `Prints Status (healthy, degraded, unavailable or draining, the same answer
as GET /readyz, with the reason when not healthy), Partitioned (with the time it
began), Last sync, Cache valid, Cache age, Policies loaded (with the active
revision), JWKS key sets cached, Uptime and Version. With --output json it
prints GET /v1/status as the sidecar answers it, with the same field names
(policy_revision, partitioned_since, last_sync, cache_valid, cache_age, ...).`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runSidecarStatus(cmd.Context())
		},
	}
}

func (a *app) runSidecarStatus(ctx context.Context) error {
	a.useJSON()
	c, err := a.sidecarClient()
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.GetJSON(ctx, pathStatus, statusTimeout, &raw); err != nil {
		return err
	}
	if a.json {
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return err
		}
		return a.writeJSON(doc)
	}
	var st sidecarStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("sidecar at %s: unreadable status: %w", c.base, err)}
	}
	w := table(a.stdout)
	status := st.Status
	if st.Reason != "" {
		status += " (" + st.Reason + ")"
	}
	fmt.Fprintf(w, "Status:\t%s\n", status)
	partitioned := "false"
	if st.Partitioned {
		partitioned = "true"
		if st.PartitionedSince != nil {
			partitioned += ", since " + st.PartitionedSince.UTC().Format(time.RFC3339)
		}
	}
	fmt.Fprintf(w, "Partitioned:\t%s\n", partitioned)
	lastSync := "never"
	if st.LastSync != nil {
		lastSync = st.LastSync.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "Last sync:\t%s\n", lastSync)
	fmt.Fprintf(w, "Cache valid:\t%t\n", st.CacheValid)
	fmt.Fprintf(w, "Cache age:\t%s\n", orDash(st.CacheAge))
	policies := fmt.Sprintf("%d (revision %s", st.PoliciesLoaded, st.PolicyRevision)
	if st.PolicySource != "" {
		policies += ", from " + st.PolicySource
	}
	fmt.Fprintf(w, "Policies loaded:\t%s)\n", policies)
	if st.PolicyMode != "" {
		fmt.Fprintf(w, "Policy mode:\t%s\n", st.PolicyMode)
	}
	fmt.Fprintf(w, "JWKS key sets cached:\t%d\n", st.JWKSKeySets)
	fmt.Fprintf(w, "Uptime:\t%s\n", st.Uptime)
	fmt.Fprintf(w, "Version:\t%s\n", st.Version)
	return w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// reloaded is the sidecar's answer to a policy reload.
type reloaded struct {
	Source           string `json:"source"`
	Revision         string `json:"revision"`
	PreviousRevision string `json:"previous_revision"`
	PoliciesLoaded   int    `json:"policies_loaded"`
	Persisted        bool   `json:"persisted"`
}

func (a *app) reloadPolicyCommand() *cobra.Command {
	var file string
	var allowDowngrade bool
	cmd := &cobra.Command{
		Use:   "reload-policy --bundle <file>",
		Short: "Upload a signed policy bundle; the sidecar verifies and activates it",
		Long: `Uploads the bundle (built by 'core policy bundle') to the sidecar, which
verifies its signature with policy.bundle_verify_key_file, compiles it, swaps
it in atomically for the active policy set and retires the old one; requests
in flight finish on the set they started with. Prints the new revision.

A wrong or missing signature, a bundle that does not compile, or a bundle
older than the active one (by the creation time in its signed manifest)
exits 1 and the active revision stays. --allow-downgrade activates an older
bundle on purpose.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runReloadPolicy(cmd.Context(), file, allowDowngrade)
		},
	}
	cmd.Flags().StringVar(&file, "bundle", "", "bundle `file` (tar.gz) to upload (required)")
	cmd.Flags().BoolVar(&allowDowngrade, "allow-downgrade", false, "activate the bundle even when it is older than the active one")
	_ = cmd.MarkFlagRequired("bundle")
	return cmd
}

func (a *app) runReloadPolicy(ctx context.Context, file string, allowDowngrade bool) error {
	a.useJSON()
	c, err := a.sidecarClient()
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return inputError(fmt.Errorf("--bundle: %w", err))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.IsDir() {
		return inputError(fmt.Errorf("--bundle %s: not a bundle file", file))
	}
	path := pathReloadPolicy
	if allowDowngrade {
		path += "?" + url.Values{"allow_downgrade": {"true"}}.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	resp, err := c.Do(ctx, http.MethodPost, path, f, "application/gzip")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("sidecar at %s: unreadable answer: %w", c.base, err)}
	}
	if a.json {
		var doc any
		_ = json.Unmarshal(raw, &doc)
		return a.writeJSON(doc)
	}
	var r reloaded
	_ = json.Unmarshal(raw, &r)
	fmt.Fprintf(a.stdout, "policy revision %s active (previous %s, %s)\n", r.Revision, r.PreviousRevision, plural(r.PoliciesLoaded, "policy file"))
	return nil
}
