// Package coverage measures which lines of a policy set a series of
// inputs exercises, with OPA's coverage tracer. Each input is evaluated
// the way a decision is made (allow and deny_reasons, both always
// evaluated), and a line counts as covered when any input evaluated it.
package coverage

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/svc-dev/svc/engine/policy"
)

// query evaluates both decision rules whatever their values, so that the
// rules behind deny_reasons are covered even when allow is undefined.
const query = `allow := [x | x := data.svc.authz.allow]; reasons := [x | x := data.svc.authz.deny_reasons]`

// Range is a span of lines, both ends included.
type Range struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// File is the coverage of one policy file.
type File struct {
	File string `json:"file"`
	// Covered and NotCovered are the lines that hold a rule head or an
	// expression, merged into ranges. A line holding both a covered and
	// an uncovered expression is in both.
	Covered    []Range `json:"covered"`
	NotCovered []Range `json:"not_covered"`
	// CoveredLines and NotCoveredLines count the lines of each list.
	CoveredLines    int `json:"covered_lines"`
	NotCoveredLines int `json:"not_covered_lines"`
	// Percent is CoveredLines over both counts, 0 to 100.
	Percent float64 `json:"percent"`
}

// Report is the coverage of a policy set.
type Report struct {
	// Files lists every module of the set, sorted by name.
	Files           []File  `json:"files"`
	CoveredLines    int     `json:"covered_lines"`
	NotCoveredLines int     `json:"not_covered_lines"`
	Percent         float64 `json:"percent"`
	// Inputs is the number of inputs evaluated.
	Inputs int `json:"inputs"`
}

// Measure evaluates every input with set under OPA's coverage tracer and
// reports the lines they covered. Evaluation errors are returned, with
// the index of the input that failed.
func Measure(ctx context.Context, set *policy.Set, inputs []any) (Report, error) {
	pq, err := rego.New(
		rego.Query(query),
		rego.SetRegoVersion(ast.RegoV1),
		rego.Compiler(set.Compiler()),
		rego.Store(set.Storage()),
	).PrepareForEval(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("prepare coverage query: %w", err)
	}
	tracer := cover.New()
	for i, in := range inputs {
		if _, err := pq.Eval(ctx, rego.EvalInput(in), rego.EvalQueryTracer(tracer)); err != nil {
			return Report{}, fmt.Errorf("input %d: %w", i+1, err)
		}
	}
	modules := set.Modules()
	opa := tracer.Report(modules)
	r := Report{
		CoveredLines:    opa.CoveredLines,
		NotCoveredLines: opa.NotCoveredLines,
		Percent:         opa.Coverage,
		Inputs:          len(inputs),
		Files:           make([]File, 0, len(modules)),
	}
	for _, name := range slices.Sorted(maps.Keys(modules)) {
		f := File{File: name, Covered: []Range{}, NotCovered: []Range{}}
		if fr := opa.Files[name]; fr != nil {
			f.Covered = lineRanges(fr.Covered)
			f.NotCovered = lineRanges(fr.NotCovered)
			f.CoveredLines, f.NotCoveredLines, f.Percent = fr.CoveredLines, fr.NotCoveredLines, fr.Coverage
		}
		r.Files = append(r.Files, f)
	}
	return r, nil
}

// lineRanges merges OPA's ranges (which carry columns and may overlap)
// into sorted, disjoint line ranges; adjacent lines join one range.
func lineRanges(in []cover.Range) []Range {
	rs := make([]Range, 0, len(in))
	for _, r := range in {
		rs = append(rs, Range{Start: r.Start.Row, End: max(r.End.Row, r.Start.Row)})
	}
	slices.SortFunc(rs, func(a, b Range) int { return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End)) })
	out := []Range{}
	for _, r := range rs {
		if n := len(out); n > 0 && r.Start <= out[n-1].End+1 {
			out[n-1].End = max(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}
