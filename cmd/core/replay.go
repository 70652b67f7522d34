package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/dryrun"
	"github.com/svc-dev/svc/reason"
)

// maxRecordLine bounds one line of --from.
const maxRecordLine = 16 << 20

type replayFlags struct {
	from        string
	evalTimeout time.Duration
}

func (a *app) policyReplayCommand() *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay <policy-dir>",
		Short: "Evaluate a candidate policy against recorded decisions",
		Long: `Evaluates the candidate policy in <policy-dir> on the input of every decision
record in --from (NDJSON, one record per line, as the decision log ships them;
"-" reads stdin) and compares its outcome with the logged one. It prints the
report of core policy dry-run, --output json with the same keys: evaluated,
allow, simulated_deny, errors, timeouts, skipped, top_deny_reasons
([{reason, count}]) and changed.

Records the policy did not decide (a refused credential, a spent budget) are
ignored, as dry-run ignores them. Records without an input (written with
decision_log.include_input = false, with /input masked, or too large for
the spool with it: "input_omitted") cannot be evaluated: they are counted
as skipped and a line on stderr says how many.
The input of a record is redacted (custom claims, e-mail, most header and
query values read "[REDACTED]"), and a masked value is absent: a candidate
that decides on those reads them so.

A line that is not a decision record exits 2 naming its line number.
Ctrl-C stops reading and prints the report of the records read.`,
		Args: args("<policy-dir>"),
		RunE: func(cmd *cobra.Command, argv []string) error { return a.runReplay(cmd, argv[0], f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.from, "from", "", "decision records to replay, NDJSON (`path`, or - for stdin)")
	fl.DurationVar(&f.evalTimeout, "eval-timeout", time.Second, "cut one evaluation off after `duration`, counted in timeouts")
	return cmd
}

func (a *app) runReplay(cmd *cobra.Command, dir string, f replayFlags) error {
	asJSON := a.useJSON()
	if f.from == "" {
		return usageError("%s needs --from <records.ndjson>", cmd.CommandPath())
	}
	if f.evalTimeout <= 0 {
		return usageError("invalid --eval-timeout %s: want more than 0", f.evalTimeout)
	}
	set, err := a.loadPolicy(dir)
	if err != nil {
		return err
	}
	in := io.Reader(os.Stdin)
	name := "stdin"
	if f.from != "-" {
		file, err := os.Open(f.from)
		if err != nil {
			return inputError(fmt.Errorf("--from %s: %w", f.from, unwrapPath(err)))
		}
		defer file.Close()
		in, name = file, f.from
	}
	ctx, stop := interruptible(cmd.Context())
	defer stop()

	rp := dryrun.NewReplay(set, f.evalTimeout, nil)
	var skipped, ignored int
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxRecordLine)
	line := 0
	for ctx.Err() == nil && sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		ev, hasInput, err := parseRecord(sc.Bytes())
		switch {
		case err != nil:
			return inputError(fmt.Errorf("%s:%d: %w", name, line, err))
		case !ev.Evaluated:
			ignored++
		case !hasInput:
			skipped++
			rp.Skip()
		default:
			rp.Evaluate(ctx, ev)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("a record longer than %d MiB", maxRecordLine>>20)
		}
		return inputError(fmt.Errorf("%s:%d: %w", name, line+1, err))
	}
	if skipped > 0 {
		fmt.Fprintf(a.stderr, "core: %s skipped: no input to evaluate (decision_log.include_input = false, /input masked, or input_omitted)\n",
			plural(skipped, "record"))
	}
	if ignored > 0 {
		fmt.Fprintf(a.stderr, "core: %s ignored: the credential or the budget decided, not the policy, or a resource plan\n", plural(ignored, "record"))
	}
	r := rp.Report()
	if asJSON {
		return a.writeJSON(r)
	}
	printDryRunReport(a.stdout, "replay", r)
	return nil
}

// loggedRecord is a decision record as the decision log writes it: the
// audit record with the input.
type loggedRecord struct {
	audit.Record
	Allow  *bool           `json:"allow"`
	Reason *string         `json:"reason"`
	Input  json.RawMessage `json:"input"`
}

// parseRecord reads one decision record. Evaluated is set when the
// policy decided (PolicyAllow then being the logged outcome); hasInput
// when the record carries the input.
func parseRecord(b []byte) (engine.DecisionEvent, bool, error) {
	var rec loggedRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return engine.DecisionEvent{}, false, fmt.Errorf("not a decision record: %s is not %s", te.Field, te.Type)
		}
		return engine.DecisionEvent{}, false, fmt.Errorf("not a JSON object: %w", err)
	}
	if rec.Allow == nil || rec.Reason == nil {
		return engine.DecisionEvent{}, false, errors.New("not a decision record: it has no allow or no reason")
	}
	ev := engine.DecisionEvent{Record: rec.Record}
	ev.Record.Allow, ev.Record.Reason = *rec.Allow, *rec.Reason
	if rec.Plan != "" {
		// A resource plan decides no one resource: nothing to compare.
		return ev, false, nil
	}
	switch reason.Code(*rec.Reason) {
	case reason.PolicyAllow, reason.PolicyDeny, reason.PolicyError:
		ev.Evaluated, ev.PolicyAllow = true, *rec.Allow
	default:
		return ev, false, nil
	}
	if len(rec.Input) == 0 || string(rec.Input) == "null" {
		return ev, false, nil
	}
	if err := json.Unmarshal(rec.Input, &ev.Input); err != nil {
		return engine.DecisionEvent{}, false, fmt.Errorf("the input is not a policy input: %w", err)
	}
	return ev, true, nil
}
