package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// statusHealthy is GET /v1/status's status of a sidecar that is ready and
// in sync.
const statusHealthy = wire.StatusHealthy

// Paths of the sidecar's local HTTP API that the sidecar commands use.
const (
	pathStatus       = wire.PathStatus
	pathReloadPolicy = wire.PathReloadPolicy
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
SVC_ADMIN_TOKEN_FILE; that token goes over https, or plain http to a
loopback host only.

Exit codes: 0 ok, 1 the sidecar refused (a wrong or missing bundle
signature, an older revision) or is not healthy (status, restart), 2 usage or input error (an unreadable
bundle file), 3 the sidecar could not be reached, 4 refused to send the admin
token over plain http to a host that is not loopback.`,
	}
	group(cmd)
	cmd.AddCommand(talksToSidecar(a.sidecarStatusCommand()), talksToSidecar(a.reloadPolicyCommand()), talksToSidecar(a.restartCommand()))
	return cmd
}

func (a *app) sidecarStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Print the sidecar's health, partition state, caches, policies, uptime and version",
		Long: `Prints Status (healthy, degraded, unavailable or draining, with the reason
when not healthy; unavailable or draining exactly when GET /readyz says not
ready), Partitioned (with the time it began), Last sync, Cache valid, Cache age, Policies loaded (with the active
revision, where it came from and, for a bundle, when it was created), Last bundle accepted (the record
in sidecar.state_dir that a new process orders bundles against), Policy mode (enforce, or dry-run when
policy.mode never denies), JWKS key sets cached, the decision log and Redis
(its eviction policy) when configured, Uptime and Version. With
--output json it prints GET /v1/status as the sidecar answers it, with the
same field names (policy_revision, partitioned_since, last_sync, cache_valid,
cache_age, policy_mode, ...).

Exit codes, for scripts (core sidecar status && ...): 0 the sidecar is
healthy; 1 it answers but is degraded, unavailable or draining (the report
is printed all the same, and the status with its reason on stderr); 3 it
cannot be reached.`,
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
	var st wire.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("sidecar at %s: unreadable status: %w", c.base, err)}
	}
	status := st.Status
	if st.Reason != "" {
		status += " (" + st.Reason + ")"
	}
	if a.json {
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return err
		}
		if err := a.writeJSON(doc); err != nil {
			return err
		}
	} else if err := a.printStatus(st, status); err != nil {
		return err
	}
	// Scripts write `core sidecar status && ...`: only a healthy sidecar
	// is a success. One that answers but is degraded, unavailable or
	// draining is exit 1 (the report above says why), one that does not
	// answer exit 3 (GetJSON).
	if st.Status != statusHealthy {
		return checkFailed(fmt.Errorf("sidecar at %s is %s", c.base, status), false)
	}
	return nil
}

// printStatus writes the status report as the labelled text table.
func (a *app) printStatus(st wire.Status, status string) error {
	w := table(a.stdout)
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
	if st.PolicyCreatedAt != nil {
		policies += ", created " + st.PolicyCreatedAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(w, "Policies loaded:\t%s)\n", policies)
	if r := st.PolicyHandoverRefused; r != nil {
		fmt.Fprintf(w, "Bundle refused on restart:\t%s: %s\n", r.Code, r.Message)
	}
	if ps := st.PolicyState; ps != nil && ps.Revision != "" {
		last := "revision " + ps.Revision
		if ps.CreatedAt != nil {
			last += ", created " + ps.CreatedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "Last bundle accepted:\t%s (%s)\n", last, ps.File)
	}
	if st.PolicyMode != "" {
		fmt.Fprintf(w, "Policy mode:\t%s\n", st.PolicyMode)
	}
	fmt.Fprintf(w, "JWKS key sets cached:\t%d\n", st.JWKSKeySets)
	if d := st.DecisionLog; d != nil {
		fmt.Fprintf(w, "Decision log:\t%s\n", decisionLogLine(d))
	}
	if r := st.Redis; r != nil {
		fmt.Fprintf(w, "Redis:\t%s\n", redisLine(r))
	}
	fmt.Fprintf(w, "Uptime:\t%s\n", st.Uptime)
	fmt.Fprintf(w, "Version:\t%s\n", st.Version)
	if ps := st.PolicyState; ps != nil && ps.File == "" {
		fmt.Fprintf(w, "Warning:\tno state directory: a new process forgets the last bundle accepted and takes an older one; set sidecar.state_dir\n")
	}
	if ps := st.PolicyState; ps != nil && ps.LastError != "" {
		fmt.Fprintf(w, "Warning:\tthe record of the last bundle accepted: %s\n", ps.LastError)
	}
	if st.SAML != nil && st.SAML.SignatureCheckDisabled {
		fmt.Fprintf(w, "Warning:\tSAML signatures are NOT verified (SVC_ENV=development): anyone who reaches the sign-in listener signs in as anyone\n")
	}
	if r := st.Redis; r != nil && r.Evicts {
		fmt.Fprintf(w, "Warning:\tRedis at %s may evict keys when full (maxmemory-policy %s, maxmemory %d bytes): logouts, the SAML replay store and rate-limit budgets kept there can be lost; set maxmemory-policy noeviction\n",
			r.Addr, r.MaxMemoryPolicy, r.MaxMemory)
	}
	if st.SAML != nil && st.SAML.TokenKeyEphemeral {
		fmt.Fprintf(w, "Warning:\tSAML sessions are ephemeral: no sdk.saml.token_signing_key_file, so every restart or replica signs everyone out\n")
	}
	return w.Flush()
}

// decisionLogLine summarises the decision log's state: the sink, whether
// it is reachable, the backlog and what was shipped, retried, lost and
// refused.
func decisionLogLine(d *wire.DecisionLogStatus) string {
	conn := "connected"
	if !d.Connected {
		conn = "not connected"
	}
	line := fmt.Sprintf("%s, %s, %d unsent", d.Sink, conn, d.Unsent)
	if d.OldestUnsentAge != "" {
		line += " (oldest " + d.OldestUnsentAge + ")"
	}
	line += fmt.Sprintf(", %d shipped, %d retries, %d dropped, %d refused", d.Shipped, d.Retries, d.Dropped, d.Refused)
	if d.LastError != "" {
		line += "; last error: " + d.LastError
	}
	return line
}

// redisLine summarises what the Redis of rate_limit.redis_addr said of
// its memory bound.
func redisLine(r *wire.RedisStatus) string {
	line := r.Addr
	switch {
	case r.CheckedAt == nil:
		line += ", not checked yet"
	case r.MaxMemory == 0:
		line += fmt.Sprintf(", maxmemory-policy %s, no maxmemory: never evicts", r.MaxMemoryPolicy)
	case r.Evicts:
		line += fmt.Sprintf(", maxmemory-policy %s, maxmemory %d bytes: evicts keys when full", r.MaxMemoryPolicy, r.MaxMemory)
	default:
		line += fmt.Sprintf(", maxmemory-policy %s, maxmemory %d bytes", r.MaxMemoryPolicy, r.MaxMemory)
	}
	if r.LastError != "" {
		line += "; last error: " + r.LastError
	}
	return line
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

A wrong or missing signature (the sidecar answers 422
bundle-signature-invalid), a bundle that does not compile (422 policy-error),
or a bundle older than the active one (by the creation time in its signed
manifest; 409 revision-older) exits 1 and the active revision stays. --allow-downgrade activates an older
bundle on purpose.

Without policy.bundle_verify_key_file, a sidecar in development mode (no
identity source: no sdk.jwks_url, jwt.issuer_url, [[jwt.issuers]] nor [sdk.saml]) activates a bundle without checking any
signature, an unsigned one too; a sidecar outside development mode refuses
every bundle until the key is configured.`,
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
	if ae := (*APIError)(nil); errors.As(err, &ae) && ae.Code == string(reason.BundleSignatureInvalid) {
		return &exitError{code: exitFailed, err: fmt.Errorf("%w\nthe bundle's signature does not verify with the sidecar's policy.bundle_verify_key_file; the active policy stays", ae)}
	}
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
	if !r.Persisted {
		fmt.Fprintf(a.stderr, "core: note: the bundle is not persisted (policy.bundle_cache_dir is not set): core sidecar restart and SIGHUP keep it, a new process serves the configured policy again\n")
	}
	return nil
}

// pathRestart asks the sidecar to restart itself.
const pathRestart = wire.PathRestart

// restartGrace is how long restart waits for the new image beyond the
// drain timeout.
const restartGrace = time.Minute

// restartSettle is how long restart waits, once the new image is ready,
// for it to report healthy. A new image is ready before its background
// fetches (IdP metadata, the bundle server) have answered once, and is
// degraded until they do; a restart that reported that moment as a
// failure would fail every SAML deployment whose metadata comes from a
// URL. A sidecar that stays degraded is reported as such after it.
const restartSettle = 10 * time.Second

func (a *app) restartCommand() *cobra.Command {
	var drain string
	var force bool
	cmd := &cobra.Command{
		Use:   "restart [--drain-timeout 30] [--force]",
		Short: "Drain the sidecar and restart it in place without closing its listening sockets",
		Long: `Asks the sidecar to restart: it stops taking new work (gRPC GOAWAY, HTTP
keep-alives closed), lets in-flight requests finish within --drain-timeout
seconds (default 30; a Go duration such as 500ms is accepted too), flushes
the OTel batch and the audit log, and replaces its process image with a new
one of the same executable (same PID, so it works as PID 1 in a container)
that inherits the listening sockets: connections that arrive meanwhile wait
in the kernel's queue instead of being refused. --force skips draining.

The command waits until the new image reports ready (and, for up to 10
seconds more, healthy: a new image is degraded until its first fetch of the
IdP metadata or the bundle server has answered) and prints its status and
dotted version, such as "healthy 0.1.0". Exit 1 when the sidecar refuses or
does not come back healthy, 3 when it cannot be reached.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := parseDrain(drain)
			if err != nil {
				return err
			}
			return a.runRestart(cmd.Context(), d, force)
		},
	}
	cmd.Flags().StringVar(&drain, "drain-timeout", "30", "`seconds` in-flight requests may take to finish")
	cmd.Flags().BoolVar(&force, "force", false, "skip draining: stop in-flight requests at once")
	return cmd
}

// parseDrain reads --drain-timeout: whole or fractional seconds, or a Go
// duration.
func parseDrain(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil && f >= 0 {
		return time.Duration(f * float64(time.Second)), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, nil
	}
	return 0, usageError("invalid --drain-timeout %q: want seconds, such as 30", s)
}

type restartReport struct {
	Status            string    `json:"status"`
	Version           string    `json:"version"`
	Ready             bool      `json:"ready"`
	PID               int       `json:"pid"`
	StartedAt         time.Time `json:"started_at"`
	PreviousStartedAt time.Time `json:"previous_started_at"`
	Seconds           float64   `json:"seconds"`
	// PolicyRevision is the revision the new image serves;
	// PreviousPolicyRevision the one served before the restart. They
	// differ when the policy directory changed, or when the new image's
	// configuration refused the bundle served before the restart.
	PolicyRevision         string `json:"policy_revision"`
	PreviousPolicyRevision string `json:"previous_policy_revision"`
}

func (a *app) runRestart(ctx context.Context, drain time.Duration, force bool) error {
	a.useJSON()
	c, err := a.sidecarClient()
	if err != nil {
		return err
	}
	var before struct {
		StartedAt      time.Time `json:"started_at"`
		PolicyRevision string    `json:"policy_revision"`
	}
	if err := c.GetJSON(ctx, pathStatus, statusTimeout, &before); err != nil {
		return err
	}
	began := time.Now()
	in := map[string]any{"drain_timeout_seconds": drain.Seconds(), "force": force}
	if err := c.JSON(ctx, http.MethodPost, pathRestart, in, statusTimeout, nil); err != nil {
		return err
	}
	deadline := time.Now().Add(drain + restartGrace)
	var st wire.Status
	var (
		last    error
		readyAt time.Time
	)
	for {
		st.StartedAt = time.Time{}
		err := c.GetJSON(ctx, pathStatus, statusTimeout, &st)
		if err == nil && st.StartedAt.After(before.StartedAt) && st.Ready {
			if readyAt.IsZero() {
				readyAt = time.Now()
			}
			if st.Status == statusHealthy || time.Since(readyAt) >= restartSettle || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return last
			}
			return &exitError{code: exitFailed, err: fmt.Errorf("sidecar at %s did not come back ready within %s", c.base, drain+restartGrace)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	rep := restartReport{Status: st.Status, Version: st.Version, Ready: st.Ready, PID: st.PID,
		StartedAt: st.StartedAt, PreviousStartedAt: before.StartedAt, Seconds: time.Since(began).Seconds(),
		PolicyRevision: st.PolicyRevision, PreviousPolicyRevision: before.PolicyRevision}
	if a.json {
		if err := a.writeJSON(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "%s %s\n", rep.Status, rep.Version)
	}
	if rep.PolicyRevision != rep.PreviousPolicyRevision {
		fmt.Fprintf(a.stderr, "core: note: policy revision %s before the restart, %s (from %s) now\n",
			rep.PreviousPolicyRevision, rep.PolicyRevision, orDash(st.PolicySource))
	}
	if r := st.PolicyHandoverRefused; r != nil {
		fmt.Fprintf(a.stderr, "core: the bundle served before the restart was refused (%s): %s\n", r.Code, r.Message)
	}
	if rep.Status != statusHealthy {
		return checkFailed(fmt.Errorf("sidecar restarted but reports %s", rep.Status), true)
	}
	return nil
}
