package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/svc-dev/svc/engine/coverage"
	"github.com/svc-dev/svc/engine/fixture"
)

// coverageReport is the JSON form of `core coverage`.
type coverageReport struct {
	coverage.Report
	Fixtures int      `json:"fixtures"`
	Failing  []string `json:"failing_fixtures"`
	Min      *float64 `json:"min,omitempty"`
	Pass     bool     `json:"pass"`
}

func (a *app) coverageCommand() *cobra.Command {
	var (
		fixtures string
		min      float64
	)
	cmd := &cobra.Command{
		Use:   "coverage <policy-dir>",
		Short: "Measure which policy lines the fixtures exercise",
		Long: `Evaluates every fixture input against the policy in <policy-dir> under OPA's
coverage tracer and prints, per file, the covered and not covered line ranges
and the percentage, then the total. --fixtures defaults to <policy-dir>/fixtures.
With --min, a total below that percentage exits 1. Fixtures that fail their
expectations are listed but do not change the exit code; run policy test for
that.`,
		Args: args("<policy-dir>"),
		RunE: func(cmd *cobra.Command, argv []string) error {
			a.useJSON()
			dir := argv[0]
			if min < 0 || min > 100 {
				return usageError("invalid --min %v: want a percentage from 0 to 100", min)
			}
			if err := checkPolicyDir(dir); err != nil {
				return err
			}
			if fixtures == "" {
				if fixtures = defaultFixtures(dir); fixtures == "" {
					return usageError("give --fixtures (%s has no fixtures directory)", dir)
				}
			}
			set, err := a.loadPolicy(dir)
			if err != nil {
				return err
			}
			pairs, err := fixture.Discover(fixtures)
			if err != nil {
				return inputError(err)
			}
			inputs := make([]any, len(pairs))
			for i, p := range pairs {
				inputs[i] = p.Input
			}
			report, err := coverage.Measure(cmd.Context(), set, inputs)
			if err != nil {
				return checkFailed(fmt.Errorf("evaluate: %w", err), false)
			}
			sum, err := fixture.Run(cmd.Context(), set, pairs, fixture.RunOptions{})
			if err != nil {
				return err
			}
			rep := coverageReport{Report: report, Fixtures: len(pairs), Failing: []string{}, Pass: true}
			for _, o := range sum.Outcomes {
				if !o.Pass {
					rep.Failing = append(rep.Failing, o.Name)
				}
			}
			if cmd.Flags().Changed("min") {
				rep.Min = &min
				rep.Pass = report.Percent >= min
			}
			if a.json {
				if err := a.writeJSON(rep); err != nil {
					return err
				}
			} else {
				printCoverage(a.stdout, rep)
			}
			if !rep.Pass {
				return checkFailed(fmt.Errorf("coverage %.1f%% is below --min %v%%", report.Percent, min), false)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&fixtures, "fixtures", "", "fixture `dir` (default <policy-dir>/fixtures)")
	cmd.Flags().Float64Var(&min, "min", 0, "fail below this coverage `percent`")
	return cmd
}

func printCoverage(w io.Writer, r coverageReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "file\tcoverage\tlines\n")
	for _, f := range r.Files {
		fmt.Fprintf(tw, "%s\t%.1f%%\t%d/%d\n", f.File, f.Percent, f.CoveredLines, f.CoveredLines+f.NotCoveredLines)
	}
	fmt.Fprintf(tw, "total\t%.1f%%\t%d/%d\n", r.Percent, r.CoveredLines, r.CoveredLines+r.NotCoveredLines)
	_ = tw.Flush()
	for _, f := range r.Files {
		fmt.Fprintf(w, "\n%s\n", f.File)
		dt := table(w)
		fmt.Fprintf(dt, "  covered:\t%s\n", ranges(f.Covered))
		fmt.Fprintf(dt, "  not covered:\t%s\n", ranges(f.NotCovered))
		_ = dt.Flush()
	}
	fmt.Fprintf(w, "\n%s evaluated", plural(r.Fixtures, "fixture"))
	if len(r.Failing) > 0 {
		fmt.Fprintf(w, "; %d failing their expectations: %s", len(r.Failing), strings.Join(r.Failing, ", "))
	}
	fmt.Fprintln(w)
}

// ranges writes line ranges as "3, 5-7"; "none" when empty.
func ranges(rs []coverage.Range) string {
	if len(rs) == 0 {
		return "none"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = strconv.Itoa(r.Start)
		if r.End != r.Start {
			parts[i] += "-" + strconv.Itoa(r.End)
		}
	}
	return strings.Join(parts, ", ")
}
