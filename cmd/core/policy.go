package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/fixture"
	"github.com/svc-dev/svc/engine/lint"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/gctune"
)

func (a *app) policyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Test, lint, benchmark and bundle policies",
	}
	group(cmd)
	cmd.AddCommand(inProcess(a.policyTestCommand()), inProcess(a.policyLintCommand()), inProcess(a.policyBenchCommand()), inProcess(a.bundleCommand()), a.policyDryRunCommand(),
		inProcess(a.policyReplayCommand()), inProcess(a.policyPlanCommand()))
	return cmd
}

// testFlags are the flags of `policy test`.
type testFlags struct {
	input, inputFile, fixtures string
	expect, expectReason       string
	ci, verbose                bool
}

func (a *app) policyTestCommand() *cobra.Command {
	var f testFlags
	cmd := &cobra.Command{
		Use:   "test <policy-dir>",
		Short: "Evaluate the policy for one input or for every fixture pair",
		Long: `Evaluates the policy in <policy-dir> for one input (--input, --input-file) or
for every fixture pair in a directory (--fixtures): <name>.input.json holds an
input, <name>.expect.json the expected {"allow": …, "deny_reasons": […]}.
Without an input or --fixtures, <policy-dir>/fixtures is used when it exists.
--input is inline JSON, or @path to read a file (as curl does):

  core policy test policies --input '{"action":"orders:read","user":{"id":"u-1","roles":["viewer"],"tenant_id":"acme"},"resource":{"tenant":"acme"},"tenant":{"id":"acme","plan":"team"}}' --expect allow
  core policy test policies --input @request.json

A failing fixture, a wrong --expect or an --expect-reason that no deny reason
contains exits 1.`,
		Args: args("<policy-dir>"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.runTest(cmd, argv[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.input, "input", "", "the input: inline `json`, or @path to read a file")
	fl.StringVar(&f.inputFile, "input-file", "", "read the input from `path` (as --input @path)")
	fl.StringVar(&f.fixtures, "fixtures", "", "run every fixture pair in `dir`")
	fl.StringVar(&f.expect, "expect", "", "exit 1 unless the decision is `allow|deny`")
	fl.StringVar(&f.expectReason, "expect-reason", "", "exit 1 unless some deny reason contains `text`")
	fl.BoolVar(&f.ci, "ci", false, "machine-readable JSON output (as --output json); failures exit 1")
	fl.BoolVar(&f.verbose, "verbose", false, "also print every rule evaluated and its value")
	return cmd
}

func (a *app) runTest(cmd *cobra.Command, dir string, f testFlags) error {
	a.useJSON(f.ci)
	if f.expect != "" && f.expect != "allow" && f.expect != "deny" {
		return usageError("invalid --expect %q: want allow or deny", f.expect)
	}
	sources := 0
	for _, s := range []string{f.input, f.inputFile, f.fixtures} {
		if s != "" {
			sources++
		}
	}
	if cmd.Flags().Changed("input") && f.input == "" {
		return usageError("--input is empty: give the input as inline JSON, or @path to read a file")
	}
	if err := checkPolicyDir(dir); err != nil {
		return err
	}
	switch {
	case sources > 1:
		return usageError("give only one of --input, --input-file and --fixtures")
	case sources == 0:
		if f.fixtures = defaultFixtures(dir); f.fixtures == "" {
			return usageError("nothing to test: give --input, --input-file or --fixtures (%s has no fixtures directory)", dir)
		}
	}
	if f.fixtures != "" && (f.expect != "" || f.expectReason != "") {
		return usageError("--expect and --expect-reason apply to one input; fixtures carry their own expectations")
	}
	set, err := a.loadPolicy(dir)
	if err != nil {
		return err
	}
	if f.fixtures != "" {
		return a.runFixtures(cmd, set, f)
	}
	if f.inputFile != "" {
		f.input = "@" + f.inputFile
	}
	name, raw, err := readInput("input", f.input)
	if err != nil {
		return err
	}
	input, err := fixture.DecodeJSON(name, raw)
	if err != nil {
		return inputError(err)
	}
	res, rules, err := fixture.Evaluate(cmd.Context(), set, input, f.verbose)
	if err != nil {
		return checkFailed(fmt.Errorf("evaluate: %w", err), false)
	}
	assert := fixture.Assertion{Expect: f.expect, ReasonContains: f.expectReason}
	failures := assert.Check(res)
	checked := f.expect != "" || f.expectReason != ""

	if a.json {
		out := struct {
			policy.Result
			Checks *testChecks       `json:"checks,omitempty"`
			Rules  []policy.RuleEval `json:"rules,omitempty"`
		}{Result: res, Rules: rules}
		if checked {
			out.Checks = &testChecks{Expect: f.expect, ExpectReason: f.expectReason, Pass: len(failures) == 0, Failures: append([]string{}, failures...)}
		}
		if err := a.writeJSON(out); err != nil {
			return err
		}
	} else {
		a.printDecision(res, rules)
		for _, msg := range failures {
			fmt.Fprintf(a.stdout, "FAIL %s\n", msg)
		}
		if checked && len(failures) == 0 {
			fmt.Fprintln(a.stdout, "PASS")
		}
	}
	if len(failures) > 0 {
		return checkFailed(errors.New(strings.Join(failures, "; ")), true)
	}
	return nil
}

// testChecks is the JSON form of the assertions of `policy test`.
type testChecks struct {
	Expect       string   `json:"expect,omitempty"`
	ExpectReason string   `json:"expect_reason,omitempty"`
	Pass         bool     `json:"pass"`
	Failures     []string `json:"failures"`
}

func (a *app) printDecision(res policy.Result, rules []policy.RuleEval) {
	fmt.Fprintf(a.stdout, "allow: %v\n", res.Allow)
	if len(res.DenyReasons) == 0 {
		fmt.Fprintln(a.stdout, "deny_reasons: none")
	} else {
		fmt.Fprintln(a.stdout, "deny_reasons:")
		for _, r := range res.DenyReasons {
			fmt.Fprintf(a.stdout, "  %s\n", r)
		}
	}
	if rules != nil {
		fmt.Fprintln(a.stdout, "rules:")
		printRules(a.stdout, rules, "  ")
	}
}

// printRules writes one aligned line per rule: name, location, value.
func printRules(w io.Writer, rules []policy.RuleEval, prefix string) {
	tw := table(w)
	for _, r := range rules {
		value := r.Value
		if !r.Evaluated {
			value = "not evaluated"
		}
		fmt.Fprintf(tw, "%s%s\t%s\t%s\n", prefix, r.Name, r.Location(), value)
	}
	_ = tw.Flush()
}

func (a *app) runFixtures(cmd *cobra.Command, set *policy.Set, f testFlags) error {
	pairs, err := fixture.Discover(f.fixtures)
	if err != nil {
		return inputError(err)
	}
	plans, err := fixture.DiscoverPlans(f.fixtures)
	if err != nil {
		return inputError(err)
	}
	sum, err := fixture.Run(cmd.Context(), set, pairs, fixture.RunOptions{Explain: f.verbose})
	if err != nil {
		return err
	}
	if sum.Plans, err = fixture.RunPlans(cmd.Context(), set, plans); err != nil {
		return err
	}
	for _, o := range sum.Plans {
		if o.Pass {
			sum.Passed++
		} else {
			sum.Failed++
		}
	}
	if a.json {
		if err := a.writeJSON(sum); err != nil {
			return err
		}
	} else {
		for _, o := range sum.Outcomes {
			if o.Pass {
				fmt.Fprintf(a.stdout, "PASS %s\n", o.Name)
			} else {
				fmt.Fprintf(a.stdout, "FAIL %s: %s\n", o.Name, o.Detail())
			}
			if f.verbose && o.Rules != nil {
				printRules(a.stdout, o.Rules, "    ")
			}
		}
		for _, o := range sum.Plans {
			if o.Pass {
				fmt.Fprintf(a.stdout, "PASS %s (plan %s, %d rows)\n", o.Name, o.Kind, o.Rows)
			} else {
				fmt.Fprintf(a.stdout, "FAIL %s: %s\n", o.Name, o.Detail())
			}
		}
		fmt.Fprintf(a.stdout, "%d passed, %d failed\n", sum.Passed, sum.Failed)
	}
	if sum.Failed > 0 {
		return checkFailed(fmt.Errorf("%s failed", plural(sum.Failed, "fixture")), true)
	}
	return nil
}

func (a *app) policyLintCommand() *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "lint <policy-dir>",
		Short: "Check policies for syntax errors and common mistakes",
		Long: `Checks the policy in <policy-dir>: OPA's parser and compiler in strict mode,
and the rules of svc (package svc.authz, allow with default false, deny_reasons
a set of strings, input fields that exist). Prints one line per file, or one
per finding, then the counts. Errors exit 1; with --strict, warnings too.

Rules:
` + ruleList(),
		Args: args("<policy-dir>"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			a.useJSON()
			if err := checkPolicyDir(argv[0]); err != nil {
				return err
			}
			report, err := lint.Dir(argv[0], lint.Options{Strict: strict})
			if err != nil {
				return inputError(err)
			}
			if a.json {
				if err := a.writeJSON(report); err != nil {
					return err
				}
			} else {
				printLint(a.stdout, report)
			}
			if report.Errors > 0 {
				return checkFailed(fmt.Errorf("lint found %s", plural(report.Errors, "error")), true)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&strict, "strict", false, "treat warnings as errors")
	a.formatFlag(cmd)
	return cmd
}

func ruleList() string {
	var b strings.Builder
	tw := table(&b)
	for _, r := range lint.Rules() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.ID, r.Severity, r.Summary)
	}
	_ = tw.Flush()
	return b.String()
}

func printLint(w io.Writer, r *lint.Report) {
	for _, f := range r.Files {
		if len(f.Findings) == 0 {
			fmt.Fprintf(w, "ok  %s\n", f.File)
			continue
		}
		for _, x := range f.Findings {
			pos := f.File
			if x.Line > 0 {
				pos += fmt.Sprintf(":%d", x.Line)
				if x.Col > 0 {
					pos += fmt.Sprintf(":%d", x.Col)
				}
			}
			fmt.Fprintf(w, "%s: %s %s: %s\n", pos, x.Severity, x.Rule, x.Message)
		}
	}
	fmt.Fprintf(w, "%s, %s\n", plural(r.Errors, "error"), plural(r.Warnings, "warning"))
}

// maxIterations bounds --iterations: every latency is kept in memory to
// compute exact percentiles.
const maxIterations = 10_000_000

// benchFlags are the flags of `policy bench`.
type benchFlags struct {
	input, inputFile string
	iterations, warm int
	p99MaxUS         float64
	ci               bool
	p99MaxSet        bool
}

func (a *app) policyBenchCommand() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench <policy-dir>",
		Short: "Benchmark in-process policy evaluation",
		Long: `Evaluates the policy in <policy-dir> repeatedly, in-process, with the compiled
decision query the sidecar uses, and reports latency percentiles in
microseconds, heap allocations per evaluation, and the CPU time per
evaluation: the user plus system time of the whole process (getrusage
RUSAGE_SELF: every thread, the garbage collector's included) over the timed
loop, divided by the iterations. Latencies include time spent waiting for a
CPU and grow with the machine's load; the CPU time per evaluation does not
count that wait, so it is the figure to compare between runs on a busy
machine.

Without --input the input is an editor of tenant acme (plan team) updating one
of its orders through a proxy, which the default policy allows after running
every rule on its allow path. --input is a path (as the specification writes
--input <path> for bench), inline JSON, or @path (as curl does): a value that
does not start as JSON and names a readable file is that file. With --p99-max-us and --ci, a p99 above the threshold exits 1;
without --ci it only prints a warning. Latency depends on the machine: set the
gate from a run on the machine that enforces it.`,
		Args: args("<policy-dir>"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			f.p99MaxSet = cmd.Flags().Changed("p99-max-us")
			return a.runBench(cmd, argv[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.input, "input", "", "the input: a `path`, inline JSON, or @path (default: a representative allowed input)")
	fl.StringVar(&f.inputFile, "input-file", "", "read the input from `path` (as --input @path)")
	fl.IntVar(&f.iterations, "iterations", 1000, "timed evaluations")
	fl.IntVar(&f.warm, "warmup", 100, "untimed evaluations first")
	fl.Float64Var(&f.p99MaxUS, "p99-max-us", 0, "p99 threshold in `microseconds`")
	fl.BoolVar(&f.ci, "ci", false, "JSON output, and exit 1 when p99 exceeds --p99-max-us")
	return cmd
}

// benchReport is the JSON form of `policy bench`.
type benchReport struct {
	Policy      string        `json:"policy"`
	Input       string        `json:"input"`
	InputForm   string        `json:"input_form"`
	Decision    policy.Result `json:"decision"`
	Iterations  int           `json:"iterations"`
	Warmup      int           `json:"warmup"`
	P50         float64       `json:"p50_us"`
	P95         float64       `json:"p95_us"`
	P99         float64       `json:"p99_us"`
	P999        float64       `json:"p999_us"`
	Max         float64       `json:"max_us"`
	Mean        float64       `json:"mean_us"`
	AllocsPerOp float64       `json:"allocs_per_op"`
	BytesPerOp  float64       `json:"bytes_per_op"`
	// CPUPerOp is the process's user+sys CPU time per evaluation, in
	// microseconds; absent where the system does not report it.
	CPUPerOp *float64 `json:"cpu_per_op_us,omitempty"`
	GC       string   `json:"gc"`
	P99MaxUS *float64 `json:"p99_max_us,omitempty"`
	Pass     bool     `json:"pass"`
}

func (a *app) runBench(cmd *cobra.Command, dir string, f benchFlags) error {
	a.useJSON(f.ci)
	if f.iterations < 1 || f.iterations > maxIterations {
		return usageError("invalid --iterations %d: want 1 to %d", f.iterations, maxIterations)
	}
	if f.warm < 0 {
		return usageError("invalid --warmup %d: want 0 or more", f.warm)
	}
	if f.p99MaxSet && f.p99MaxUS < 0 {
		return usageError("invalid --p99-max-us %v: want 0 or more", f.p99MaxUS)
	}
	switch {
	case f.input != "" && f.inputFile != "":
		return usageError("give only one of --input and --input-file")
	case f.inputFile != "":
		f.input = "@" + f.inputFile
	case cmd.Flags().Changed("input") && f.input == "":
		return usageError("--input is empty: give the input as inline JSON, or @path to read a file")
	}
	var (
		input any = fixture.DefaultBenchInput()
		name      = "default (editor updates orders:update in tenant acme)"
		form      = "typed"
		raw   []byte
		err   error
	)
	if f.input != "" {
		if name, raw, err = readBenchInput(f.input); err != nil {
			return err
		}
	}
	set, err := a.loadPolicy(dir)
	if err != nil {
		return err
	}
	if raw != nil {
		var typed bool
		if input, typed, err = fixture.BenchInput(name, raw); err != nil {
			return inputError(err)
		}
		if !typed {
			form = "value"
		}
	}
	// The collector runs as svc-sidecar runs it, so that the tail is the
	// sidecar's; GOGC in the environment overrides both.
	gc := "GOGC " + os.Getenv("GOGC") + " (environment)"
	if tuner := gctune.Tune(os.LookupEnv); tuner != nil {
		defer tuner.Stop()
		gc = fmt.Sprintf("GOGC %d-%d tuned to the live heap, as svc-sidecar", gctune.MinPercent, gctune.MaxPercent)
	}
	res, err := fixture.Bench(cmd.Context(), set, input, fixture.BenchOptions{Iterations: f.iterations, Warmup: f.warm})
	if err != nil {
		return checkFailed(fmt.Errorf("evaluate: %w", err), false)
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	rep := benchReport{
		Policy: dir, Input: name, InputForm: form, Decision: res.Decision,
		Iterations: res.Iterations, Warmup: res.Warmup,
		P50: us(res.P50), P95: us(res.P95), P99: us(res.P99), P999: us(res.P999), Max: us(res.Max), Mean: us(res.Mean),
		AllocsPerOp: res.AllocsPerOp, BytesPerOp: res.BytesPerOp, GC: gc, Pass: true,
	}
	if res.CPUMeasured {
		cpu := us(res.CPUPerOp)
		rep.CPUPerOp = &cpu
	}
	if f.p99MaxSet {
		rep.P99MaxUS = &f.p99MaxUS
		rep.Pass = rep.P99 <= f.p99MaxUS
	}
	if a.json {
		if err := a.writeJSON(rep); err != nil {
			return err
		}
	} else {
		printBench(a.stdout, rep)
	}
	if rep.Pass {
		return nil
	}
	over := fmt.Errorf("p99 %.1f µs exceeds --p99-max-us %s", rep.P99, strconv.FormatFloat(f.p99MaxUS, 'f', -1, 64))
	if f.ci {
		return checkFailed(over, false)
	}
	fmt.Fprintf(a.stderr, "warning: %s\n", over)
	return nil
}

func printBench(w io.Writer, r benchReport) {
	tw := table(w)
	decision := "allow"
	if !r.Decision.Allow {
		decision = "deny " + fixture.FormatReasons(r.Decision.DenyReasons)
	}
	fmt.Fprintf(tw, "policy:\t%s\n", r.Policy)
	fmt.Fprintf(tw, "input:\t%s\n", r.Input)
	fmt.Fprintf(tw, "decision:\t%s\n", decision)
	fmt.Fprintf(tw, "iterations:\t%d (after %d warmup)\n", r.Iterations, r.Warmup)
	for _, p := range []struct {
		name string
		v    float64
	}{{"p50", r.P50}, {"p95", r.P95}, {"p99", r.P99}, {"p999", r.P999}, {"max", r.Max}, {"mean", r.Mean}} {
		fmt.Fprintf(tw, "%s:\t%.1f µs\n", p.name, p.v)
	}
	if r.CPUPerOp != nil {
		fmt.Fprintf(tw, "cpu/op:\t%.1f µs (user+sys of the process / iterations)\n", *r.CPUPerOp)
	}
	fmt.Fprintf(tw, "allocs/op:\t%.0f\n", r.AllocsPerOp)
	fmt.Fprintf(tw, "bytes/op:\t%.0f\n", r.BytesPerOp)
	fmt.Fprintf(tw, "gc:\t%s\n", r.GC)
	if r.P99MaxUS != nil {
		limit := strconv.FormatFloat(*r.P99MaxUS, 'f', -1, 64)
		if r.Pass {
			fmt.Fprintf(tw, "p99 gate:\tok (%.1f µs <= %s µs)\n", r.P99, limit)
		} else {
			fmt.Fprintf(tw, "p99 gate:\tover (%.1f µs > %s µs)\n", r.P99, limit)
		}
	}
	_ = tw.Flush()
}
