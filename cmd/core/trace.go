package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svc-dev/svc/wire"
)

type traceTailOptions struct {
	tenant, service, traceID, since string
	errorsOnly                      bool
}

func (a *app) traceCommand() *cobra.Command {
	return liveCommand("trace", "Watch the sidecar's traces live", a.traceTailCommand())
}

func (a *app) traceTailCommand() *cobra.Command {
	var o traceTailOptions
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Watch live traces of the sidecar's decisions as span trees with timings",
		Long: `Streams the spans the sidecar at --sidecar records while the tail runs,
until q or Ctrl-C.

On a terminal it is a live list of traces, each a tree of spans with their
durations (the server span of the gRPC or HTTP request, auth.verify_token,
policy.evaluate) and the outcome: allow or deny, the reason, the matched rule, the deny reasons and
the intent (action and resource).
  up/down, k/j   select          Enter   expand or collapse the span
  v              variable inspector: the span's attributes and the policy
                 input of the decision (claims other than sub, tenant_id and
                 roles redacted)
  esc            back            q       quit

When stdout is not a terminal, or with --output json, it prints one JSON
object per span per line. --tenant and --errors-only keep whole traces: those
of the tenant, those that were denied or failed. Exit 3 when the sidecar
cannot be reached or goes away.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runTraceTail(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "only traces of this tenant `id`")
	f.StringVar(&o.service, "service", "", "only spans of this service `name` (service.name)")
	f.StringVar(&o.traceID, "trace-id", "", "only the trace of this `id` (32 hex digits)")
	f.BoolVar(&o.errorsOnly, "errors-only", false, "only traces that were denied or failed")
	f.StringVar(&o.since, "since", "", "first replay the spans of this recent `duration` (5m, 1h) the sidecar still holds")
	return talksToSidecar(cmd)
}

func (a *app) runTraceTail(cmd *cobra.Command, o traceTailOptions) error {
	asJSON := a.useJSON()
	c, since, traceID, err := a.tailClient(o.since, o.traceID)
	if err != nil {
		return err
	}
	errorsOnly := ""
	if o.errorsOnly {
		errorsOnly = "true"
	}
	path := streamPath(wire.PathSpans, map[string]string{
		wire.ParamTenant: o.tenant, wire.ParamService: o.service, wire.ParamTraceID: traceID,
		wire.ParamErrorsOnly: errorsOnly, wire.ParamSince: since,
	})
	ctx, stop := interruptible(cmd.Context())
	defer stop()
	if !asJSON && a.isTerminal() {
		return a.traceBrowser(ctx, c, path)
	}
	opened := func() { fmt.Fprintf(a.stderr, "core: tailing the traces of %s (Ctrl-C stops)\n", c.base) }
	return c.Stream(ctx, path, opened, func(line []byte) error {
		if a.dropNotice(line, "spans") {
			return nil
		}
		_, err := fmt.Fprintf(a.stdout, "%s\n", line)
		return err
	})
}

// isTerminal reports whether stdout is a terminal.
func (a *app) isTerminal() bool {
	f, ok := a.stdout.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// traceBrowser runs the terminal UI on the span stream at path: the
// stream is opened first, so that an unreachable sidecar is reported
// before the screen is taken over.
func (a *app) traceBrowser(ctx context.Context, c *sidecarClient, path string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opened := make(chan struct{})
	msgs := make(chan tea.Msg, 1024)
	ended := make(chan error, 1)
	go func() {
		ended <- c.Stream(ctx, path, func() { close(opened) }, func(line []byte) error {
			var m tea.Msg
			if n, ok := wire.ParseDropped(line); ok {
				m = droppedMsg(n)
			} else {
				var sp wire.SpanRecord
				if err := json.Unmarshal(line, &sp); err != nil {
					return fmt.Errorf("unreadable span from the sidecar: %w", err)
				}
				m = spanMsg(sp)
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	select {
	case <-opened:
	case err := <-ended:
		return err
	case <-ctx.Done():
		return nil
	}
	return runBrowser(ctx, a.stdout, c.base.String(), msgs, ended)
}
