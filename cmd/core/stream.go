package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/wire"
)

// interruptible is ctx ended also by Ctrl-C or SIGTERM: long-running
// commands stop cleanly and still report.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

// sinceFlag validates --since (a duration such as 5m or 1h).
func sinceFlag(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return "", usageError("invalid --since %q: want a duration such as 5m or 1h", v)
	}
	return d.String(), nil
}

// windowFlags validates the --since and --trace-id flags that every tail
// command shares, and returns them as stream parameters: the duration
// normalized and the trace id in lower case.
func windowFlags(since, traceID string) (string, string, error) {
	since, err := sinceFlag(since)
	if err != nil {
		return "", "", err
	}
	if traceID != "" && !isTraceID(traceID) {
		return "", "", usageError("invalid --trace-id %q: want 32 hex digits", traceID)
	}
	return since, strings.ToLower(traceID), nil
}

// tailClient is the client of --sidecar for a tail command, once its
// --since and --trace-id flags are valid; since and traceID are those
// flags as windowFlags returns them.
func (a *app) tailClient(rawSince, rawTraceID string) (c *sidecarClient, since, traceID string, err error) {
	if since, traceID, err = windowFlags(rawSince, rawTraceID); err != nil {
		return nil, "", "", err
	}
	if c, err = a.sidecarClient(); err != nil {
		return nil, "", "", err
	}
	return c, since, traceID, nil
}

// streamPath is path with the non-empty parameters of q.
func streamPath(path string, q map[string]string) string {
	v := url.Values{}
	for k, s := range q {
		if s != "" {
			v.Set(k, s)
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// dropNotice reports, on stderr, a stream line telling that the sidecar
// dropped records for this watcher; it returns false for any other line.
func (a *app) dropNotice(line []byte, what string) bool {
	n, ok := wire.ParseDropped(line)
	if !ok {
		return false
	}
	fmt.Fprintf(a.stderr, "core: the sidecar dropped %d %s for this watcher (it fell behind)\n", n, what)
	return true
}

// liveCommand is a group command (log, trace) that only holds subcommands.
func liveCommand(use, short string, sub ...*cobra.Command) *cobra.Command {
	c := group(&cobra.Command{Use: use, Short: short})
	c.AddCommand(sub...)
	return c
}
