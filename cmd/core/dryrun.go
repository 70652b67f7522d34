package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/lint"
	"github.com/svc-dev/svc/wire"
)

// dryRunPoll is how often the progress of a session is fetched.
const dryRunPoll = time.Second

type dryRunFlags struct {
	duration  time.Duration
	queueSize int
	strict    bool
	signKey   string
}

func (a *app) policyDryRunCommand() *cobra.Command {
	var f dryRunFlags
	cmd := &cobra.Command{
		Use:   "dry-run <policy-dir>",
		Short: "Evaluate a candidate policy against live traffic without enforcing it",
		Long: `Compiles and lints the candidate policy in <policy-dir> (an invalid one is
refused, exit 2, before it touches traffic), then has the sidecar at --sidecar
evaluate it on the input of every policy decision for --duration, beside the
enforced policy and off the request path: enforcement is unaffected. The
sidecar writes an audit record with simulated: true and the candidate's
revision for every evaluation. Decisions that arrive while the session's
queue is full are counted as skipped rather than slowing a request.

A sidecar with policy.bundle_verify_key_file accepts only a candidate signed
by its key: give the private key with --sign-key. Each evaluation is cut off
after the sidecar's policy.dry_run_eval_timeout and counted in timeouts.

On a terminal a progress line updates every second. At the end, or on
Ctrl-C, it prints the counts (evaluated, allow, simulated deny, errors,
timeouts, skipped), the top deny reasons with counts, and where the
candidate decides differently from enforcement, by action and tenant.
--output json prints one document with the keys evaluated, allow,
simulated_deny, errors, timeouts, skipped, top_deny_reasons
([{reason, count}]) and changed. Exit 3 when the sidecar cannot be reached.`,
		Args: args("<policy-dir>"),
		RunE: func(cmd *cobra.Command, argv []string) error { return a.runDryRun(cmd, argv[0], f) },
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.duration, "duration", 5*time.Minute, "how long to evaluate live traffic (`duration`, e.g. 5m)")
	fl.IntVar(&f.queueSize, "queue-size", wire.DryRunDefaultQueueSize, "decisions that may wait for the candidate before more are skipped (`n`)")
	fl.BoolVar(&f.strict, "strict", false, "refuse the candidate on lint warnings too")
	fl.StringVar(&f.signKey, "sign-key", "", "sign the candidate with the PEM private key in `path` (a sidecar with policy.bundle_verify_key_file requires it)")
	return talksToSidecar(cmd)
}

func (a *app) runDryRun(cmd *cobra.Command, dir string, f dryRunFlags) error {
	asJSON := a.useJSON()
	if f.duration <= 0 || f.duration > wire.DryRunMaxDuration {
		return usageError("invalid --duration %s: want more than 0 and at most %s", f.duration, wire.DryRunMaxDuration)
	}
	if f.queueSize < 1 || f.queueSize > wire.DryRunMaxQueueSize {
		return usageError("invalid --queue-size %d: want 1 to %d", f.queueSize, wire.DryRunMaxQueueSize)
	}
	if err := checkPolicyDir(dir); err != nil {
		return err
	}
	if _, err := a.loadPolicy(dir); err != nil {
		return err
	}
	report, err := lint.Dir(dir, lint.Options{Strict: f.strict})
	if err != nil {
		return inputError(err)
	}
	if report.Errors > 0 {
		printLint(a.stderr, report)
		return inputError(fmt.Errorf("candidate %s refused: lint found %s", dir, plural(report.Errors, "error")))
	}
	// The sidecar decides whether the candidate may call network
	// built-ins (policy.allow_network_builtins).
	opts := bundle.BuildOptions{AllowNetworkBuiltins: true}
	if f.signKey != "" {
		key, err := os.ReadFile(f.signKey)
		if err != nil {
			return inputError(fmt.Errorf("read --sign-key: %w", err))
		}
		opts.SignKeyPEM = key
	}
	var candidate bytes.Buffer
	if _, err := bundle.Build(&candidate, dir, opts); err != nil {
		return inputError(fmt.Errorf("candidate %s: %w", dir, err))
	}
	c, err := a.sidecarClient()
	if err != nil {
		return err
	}
	ctx, stop := interruptible(cmd.Context())
	defer stop()

	q := url.Values{"duration": {f.duration.String()}, "queue_size": {strconv.Itoa(f.queueSize)}}
	resp, err := c.Do(ctx, http.MethodPost, wire.PathDryRunSessions+"?"+q.Encode(), &candidate, "application/gzip")
	if err != nil {
		return err
	}
	var r wire.DryRunReport
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r)
	resp.Body.Close()
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("sidecar at %s: unreadable answer: %w", c.base, err)}
	}
	fmt.Fprintf(a.stderr, "core: dry-run %s of revision %s on %s for %s (Ctrl-C ends it early)\n", r.ID, r.Revision, c.base, f.duration)

	progress := a.stderrIsTerminal()
	path := wire.PathDryRunSessions + "/" + r.ID
	tick := time.NewTicker(dryRunPoll)
	defer tick.Stop()
	for r.State != "finished" {
		select {
		case <-ctx.Done():
		case <-tick.C:
			if err := c.GetJSON(ctx, path, 10*time.Second, &r); err != nil {
				if ctx.Err() == nil {
					return err
				}
			}
			if progress && r.State != "finished" {
				fmt.Fprintf(a.stderr, "\r\x1b[K%s", progressLine(r, time.Now()))
			}
			continue
		}
		break
	}
	if progress {
		fmt.Fprint(a.stderr, "\r\x1b[K")
	}
	if r.State != "finished" {
		// Ctrl-C: end the session now; its final report comes back.
		endCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := c.JSON(endCtx, http.MethodDelete, path, nil, 30*time.Second, &r); err != nil {
			return err
		}
	}
	if asJSON {
		return a.writeJSON(r)
	}
	printDryRun(a.stdout, r)
	return nil
}

func (a *app) stderrIsTerminal() bool {
	f, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func progressLine(r wire.DryRunReport, now time.Time) string {
	elapsed := now.Sub(r.Started).Round(time.Second)
	total := r.Ends.Sub(r.Started).Round(time.Second)
	return fmt.Sprintf("dry-run %s/%s · evaluated %d · allow %d · simulated deny %d · errors %d · timeouts %d · skipped %d",
		min(elapsed, total), total, r.Evaluated, r.Allow, r.SimulatedDeny, r.Errors, r.Timeouts, r.Skipped)
}

func printDryRun(w io.Writer, r wire.DryRunReport) { printDryRunReport(w, "dry-run", r) }

// printDryRunReport prints r, the report of a dry-run or a replay (what).
func printDryRunReport(w io.Writer, what string, r wire.DryRunReport) {
	took := r.Ends.Sub(r.Started)
	if r.Ended != nil {
		took = r.Ended.Sub(r.Started)
	}
	fmt.Fprintf(w, "%s of revision %s: %s, %s\n", what, r.Revision, took.Round(time.Millisecond), plural(int(r.Decisions), "decision"))
	tw := table(w)
	fmt.Fprintf(tw, "  evaluated\t%d\n  allow\t%d\n  simulated deny\t%d\n  errors\t%d\n  timeouts\t%d\n  skipped\t%d\n",
		r.Evaluated, r.Allow, r.SimulatedDeny, r.Errors, r.Timeouts, r.Skipped)
	_ = tw.Flush()
	if len(r.TopDenyReason) > 0 {
		fmt.Fprintln(w, "top deny reasons:")
		tw := table(w)
		for _, x := range r.TopDenyReason {
			fmt.Fprintf(tw, "  %d\t%s\n", x.Count, x.Reason)
		}
		_ = tw.Flush()
	}
	if len(r.Changed) == 0 {
		fmt.Fprintln(w, "no decision would change")
		return
	}
	fmt.Fprintln(w, "changes against enforcement:")
	for _, ch := range r.Changed {
		verb := "deny"
		if ch.Change == "newly-allowed" {
			verb = "allow"
		}
		tenant := ch.Tenant
		if tenant == "" {
			tenant = "(none)"
		}
		fmt.Fprintf(w, "  would newly %s %d %s for tenant %s\n", verb, ch.Count, ch.Action, tenant)
	}
}
