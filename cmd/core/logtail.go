package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/wire"
	"github.com/svc-dev/svc/wire/filter"
)

type logTailOptions struct {
	tenant, filter, traceID, level, since string
}

func (a *app) logCommand() *cobra.Command {
	return liveCommand("log", "Stream the sidecar's structured logs", a.logTailCommand())
}

func (a *app) logTailCommand() *cobra.Command {
	var o logTailOptions
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Stream the sidecar's log records, one per decision included, as they happen",
		Long: `Streams the structured log records of the sidecar at --sidecar until
Ctrl-C. Every decision made while the tail runs is one record (message
"decision", level INFO when allowed, WARN when denied, ERROR when no
decision could be made), whatever the sidecar's own log level.

--filter takes field=value and field!=value comparisons joined by AND and
OR (AND binds tighter) with parentheses, e.g.
  policy.result=denied AND (tenant=acme OR user_id=u-42)
Fields: policy.result (allowed or denied), user_id, tenant, trace_id,
level, reason, action, decision_id, source, msg, and any other attribute of
a record. A malformed filter exits 2 naming the position of the problem.

Output is one coloured line per record on a terminal; --format json (or
--output json) prints one JSON object per line. Exit 3 when the sidecar
cannot be reached.`,
		Args: args(),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runLogTail(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "only records of this tenant `id`")
	f.StringVar(&o.filter, "filter", "", "field filter `expr`, e.g. policy.result=denied AND tenant=acme")
	f.StringVar(&o.traceID, "trace-id", "", "only records of this trace `id` (32 hex digits)")
	f.StringVar(&o.level, "level", "", "minimum `level`: error, warn, info or debug (trace too)")
	f.StringVar(&o.since, "since", "", "first replay the records of this recent `duration` (5m, 1h) the sidecar still holds")
	a.formatFlag(cmd)
	return talksToSidecar(cmd)
}

func (a *app) runLogTail(cmd *cobra.Command, o logTailOptions) error {
	asJSON := a.useJSON()
	if o.filter != "" {
		if _, err := filter.Parse(o.filter); err != nil {
			return filterError(o.filter, err)
		}
	}
	if o.level != "" {
		if _, err := wire.ParseLevel(o.level); err != nil {
			return usageError("invalid --level %q: want error, warn, info, debug or trace", o.level)
		}
	}
	c, since, traceID, err := a.tailClient(o.since, o.traceID)
	if err != nil {
		return err
	}
	ctx, stop := interruptible(cmd.Context())
	defer stop()
	path := streamPath(wire.PathLogs, map[string]string{
		wire.ParamTenant: o.tenant, wire.ParamFilter: o.filter, wire.ParamTraceID: traceID,
		wire.ParamLevel: o.level, wire.ParamSince: since,
	})
	p := newLogPrinter(a)
	opened := func() { fmt.Fprintf(a.stderr, "core: tailing the logs of %s (Ctrl-C stops)\n", c.base) }
	return c.Stream(ctx, path, opened, func(line []byte) error {
		if a.dropNotice(line, "log records") {
			return nil
		}
		if asJSON {
			_, err := fmt.Fprintf(a.stdout, "%s\n", line)
			return err
		}
		var r wire.LogRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("unreadable log record from the sidecar: %w", err)
		}
		return p.print(r)
	})
}

// filterError is exit 2 for a malformed --filter, with a caret under the
// position of the problem.
func filterError(expr string, err error) error {
	var se *filter.SyntaxError
	if !errors.As(err, &se) {
		return usageError("invalid --filter: %v", err)
	}
	pad := strings.Repeat(" ", max(se.Pos-1, 0))
	return inputError(fmt.Errorf("invalid --filter: %s\n  %s\n  %s^", se.Error(), expr, pad))
}

func isTraceID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// logPrinter writes log records as one line each: time, level, message,
// then key=value pairs, the fields of a decision first. Colours appear
// only when stdout is a terminal that has them.
type logPrinter struct {
	a                                    *app
	time, key, msg, err, warn, info, dbg lipgloss.Style
}

// decisionOrder is the order of the first fields of a line.
var decisionOrder = []string{"policy.result", "tenant", "user_id", "action", "resource.type", "resource.id",
	"reason", "deny_reasons", "simulated", "decision_id", "policy_revision", "latency_us", "source"}

func newLogPrinter(a *app) *logPrinter {
	r := lipgloss.NewRenderer(a.stdout)
	return &logPrinter{
		a:    a,
		time: r.NewStyle().Faint(true),
		key:  r.NewStyle().Foreground(lipgloss.Color("6")),
		msg:  r.NewStyle().Bold(true),
		err:  r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		warn: r.NewStyle().Foreground(lipgloss.Color("3")).Bold(true),
		info: r.NewStyle().Foreground(lipgloss.Color("2")),
		dbg:  r.NewStyle().Foreground(lipgloss.Color("4")),
	}
}

func (p *logPrinter) print(r wire.LogRecord) error {
	var b strings.Builder
	b.WriteString(p.time.Render(r.Time.Local().Format("15:04:05.000")))
	b.WriteByte(' ')
	lvl := fmt.Sprintf("%-5s", r.Level)
	switch l := wire.LevelOf(r.Level); {
	case l >= 8:
		lvl = p.err.Render(lvl)
	case l >= 4:
		lvl = p.warn.Render(lvl)
	case l >= 0:
		lvl = p.info.Render(lvl)
	default:
		lvl = p.dbg.Render(lvl)
	}
	b.WriteString(lvl)
	b.WriteByte(' ')
	b.WriteString(p.msg.Render(r.Message))
	keys := make([]string, 0, len(r.Attributes))
	for k, v := range r.Attributes {
		if v != "" && k != "trace_id" && k != "span_id" && !(k == "simulated" && v == "false") {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		oi, oj := slices.Index(decisionOrder, keys[i]), slices.Index(decisionOrder, keys[j])
		if oi < 0 {
			oi = len(decisionOrder)
		}
		if oj < 0 {
			oj = len(decisionOrder)
		}
		if oi != oj {
			return oi < oj
		}
		return keys[i] < keys[j]
	})
	if r.TraceID != "" {
		keys = append(keys, "trace_id")
	}
	for _, k := range keys {
		v := r.Attributes[k]
		if k == "trace_id" {
			v = r.TraceID
		}
		b.WriteByte(' ')
		b.WriteString(p.key.Render(k + "="))
		b.WriteString(quoteValue(v))
	}
	b.WriteByte('\n')
	_, err := fmt.Fprint(p.a.stdout, b.String())
	return err
}

func quoteValue(v string) string {
	if strings.ContainsAny(v, " \t\n\"=") {
		return fmt.Sprintf("%q", v)
	}
	return v
}
