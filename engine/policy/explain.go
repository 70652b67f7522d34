package policy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// RuleEval is what one rule of package svc.authz (or a package below it)
// did during an explained evaluation. Each body of a rule, and each else
// branch, is a RuleEval of its own.
type RuleEval struct {
	// Name is the rule's name as written, e.g. "allow" or "deny_reasons".
	Name string `json:"name"`
	// Package is the rule's package, e.g. "svc.authz".
	Package string `json:"package"`
	// File and Row locate the rule's head.
	File string `json:"file"`
	Row  int    `json:"row"`
	// Evaluated is true when the evaluator entered the rule's body; rules
	// that rule indexing or an earlier failure skipped are false.
	Evaluated bool `json:"evaluated"`
	// Succeeded is true when the body held at least once.
	Succeeded bool `json:"succeeded"`
	// Value is the Rego text of what the body produced: the value of a
	// complete rule or function (one per distinct result, as a JSON array
	// when there were several), the members a partial set rule added (as
	// a JSON array), or "undefined" when the body never held.
	Value string `json:"value"`
}

// Location is "file:row".
func (r RuleEval) Location() string { return r.File + ":" + strconv.Itoa(r.Row) }

// String formats the entry as "name (file:row) = value".
func (r RuleEval) String() string {
	state := r.Value
	if !r.Evaluated {
		state = "not evaluated"
	}
	return fmt.Sprintf("%s (%s) = %s", r.Name, r.Location(), state)
}

// Explain evaluates the policy like EvalValue and also reports every rule
// of the policy's packages, in file and line order, with what it produced.
// It is much slower than EvalValue and meant for tools, not for serving.
func (s *Set) Explain(ctx context.Context, input any) (Result, []RuleEval, error) {
	v, err := inputValue(input)
	if err != nil {
		return Result{}, nil, err
	}
	tr := newRuleTracer(s.compiler.Modules)
	res, err := s.evalTraced(ctx, v, tr)
	if err != nil {
		return Result{}, nil, err
	}
	return res, tr.report(), nil
}

// ruleTracer records, for each rule of interest, whether it was entered
// and the values it produced when it exited.
type ruleTracer struct {
	rules  map[*ast.Rule]*ruleRecord
	sorted []*ruleRecord
}

type ruleRecord struct {
	eval   RuleEval
	kind   ast.RuleKind
	values []*ast.Term
}

func newRuleTracer(modules map[string]*ast.Module) *ruleTracer {
	t := &ruleTracer{rules: map[*ast.Rule]*ruleRecord{}}
	for _, m := range modules {
		if !m.Package.Path.HasPrefix(packageRef) {
			continue
		}
		pkg := strings.TrimPrefix(m.Package.Path.String(), "data.")
		for _, rule := range m.Rules {
			for r := rule; r != nil; r = r.Else {
				rec := &ruleRecord{
					eval: RuleEval{Name: rule.Head.Ref().String(), Package: pkg},
					kind: rule.Head.RuleKind(),
				}
				if loc := r.Loc(); loc != nil {
					rec.eval.File, rec.eval.Row = loc.File, loc.Row
				}
				t.rules[r] = rec
				t.sorted = append(t.sorted, rec)
			}
		}
	}
	slices.SortStableFunc(t.sorted, func(a, b *ruleRecord) int {
		return cmp.Or(strings.Compare(a.eval.File, b.eval.File), cmp.Compare(a.eval.Row, b.eval.Row))
	})
	return t
}

// Enabled implements topdown.QueryTracer.
func (*ruleTracer) Enabled() bool { return true }

// Config implements topdown.QueryTracer: values are plugged on demand in
// TraceEvent, so the evaluator need not copy every local variable.
func (*ruleTracer) Config() topdown.TraceConfig { return topdown.TraceConfig{} }

// TraceEvent implements topdown.QueryTracer.
func (t *ruleTracer) TraceEvent(evt topdown.Event) {
	rule, ok := evt.Node.(*ast.Rule)
	if !ok {
		return
	}
	rec, ok := t.rules[rule]
	if !ok {
		return
	}
	switch evt.Op {
	case topdown.EnterOp:
		rec.eval.Evaluated = true
	case topdown.ExitOp:
		rec.eval.Evaluated, rec.eval.Succeeded = true, true
		head := rule.Head.Value
		if rec.kind == ast.MultiValue {
			head = rule.Head.Key
		}
		if head == nil {
			return
		}
		v := evt.Plug(head)
		if !slices.ContainsFunc(rec.values, v.Equal) {
			rec.values = append(rec.values, v)
		}
	}
}

func (t *ruleTracer) report() []RuleEval {
	out := make([]RuleEval, 0, len(t.sorted))
	for _, rec := range t.sorted {
		e := rec.eval
		switch {
		case !e.Succeeded:
			e.Value = "undefined"
		case rec.kind == ast.MultiValue || len(rec.values) > 1:
			e.Value = ast.NewArray(rec.values...).String()
		case len(rec.values) == 1:
			e.Value = rec.values[0].String()
		default:
			e.Value = "true"
		}
		out = append(out, e)
	}
	return out
}
