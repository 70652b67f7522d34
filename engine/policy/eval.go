package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/svc-dev/svc/reason"
)

// Result is the policy's decision on one input.
type Result struct {
	// Allow is data.svc.authz.allow; false when the rule is undefined.
	Allow bool `json:"allow"`
	// DenyReasons is data.svc.authz.deny_reasons, sorted; empty (never
	// nil) when the rule is undefined or holds no reason.
	DenyReasons []string `json:"deny_reasons"`
	// DecisionID is a fresh random 128-bit id in UUID text form that
	// names this evaluation in logs, traces and audit records.
	DecisionID string `json:"decision_id"`
	// Revision is the revision of the set that decided.
	Revision string `json:"revision,omitempty"`
}

// Eval evaluates the policy on a typed input: on the parts of it the
// policy can read, when the set knows them (see CacheKeys). Failures are *reason.Error:
// reason.InputInvalid when the input cannot be converted, reason.PolicyError
// when the policy fails or yields something that is not a decision.
func (s *Set) Eval(ctx context.Context, in Input) (Result, error) {
	st := s.states.get(true)
	defer s.states.put(st)
	v, err := s.input(&in, &st.doc)
	if err != nil {
		return Result{}, reason.Wrap(reason.InputInvalid, err, "convert policy input")
	}
	return s.evalWith(ctx, st, v, nil)
}

// EvalValue evaluates the policy on an input given as a JSON-like Go value
// (map[string]any, []any, string, json.Number, float64, bool, nil), as
// JSON text in a json.RawMessage, as an ast.Value, or as an Input.
// Failures are as for Eval.
func (s *Set) EvalValue(ctx context.Context, input any) (Result, error) {
	switch x := input.(type) {
	case Input:
		return s.Eval(ctx, x)
	case *Input:
		if x != nil {
			return s.Eval(ctx, *x)
		}
	}
	v, err := inputValue(input)
	if err != nil {
		return Result{}, err
	}
	return s.eval(ctx, v)
}

func inputValue(input any) (ast.Value, error) {
	var (
		v   ast.Value
		err error
	)
	switch x := input.(type) {
	case Input:
		v, err = x.Value()
	case *Input:
		if x == nil {
			return ast.Null{}, nil
		}
		v, err = x.Value()
	case ast.Value:
		return x, nil
	case json.RawMessage:
		v, err = ast.ValueFromReader(bytes.NewReader(x))
	default:
		if v, err = ast.InterfaceToValue(input); err == nil {
			err = checkNumbers(v)
		}
	}
	if err != nil {
		return nil, reason.Wrap(reason.InputInvalid, err, "convert policy input")
	}
	return v, nil
}

func (s *Set) eval(ctx context.Context, input ast.Value) (Result, error) {
	return s.evalTraced(ctx, input, nil)
}

// evalTraced evaluates the policy on input, reporting to tracer when it
// is not nil.
func (s *Set) evalTraced(ctx context.Context, input ast.Value, tracer topdown.QueryTracer) (Result, error) {
	// The state goes back for reuse once the decision is decoded: nothing
	// of the evaluation is needed after that.
	st := s.states.get(tracer == nil)
	defer s.states.put(st)
	return s.evalWith(ctx, st, input, tracer)
}

// evalWith is evalTraced in the state st, which the caller got from
// s.states and puts back once the result is returned.
func (s *Set) evalWith(ctx context.Context, st *evalState, input ast.Value, tracer topdown.QueryTracer) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, reason.Wrap(reason.PolicyError, err, "evaluate policy")
	}
	st.input.Value = input
	args := evalArgs{store: s.store, txn: s.txn, tracer: tracer, rules: &st.rules, st: st}
	allow, reasons, err := s.decide(ctx, &args)
	if err != nil {
		return Result{}, err
	}
	res := Result{Revision: s.revision}
	if res.Allow, err = decodeAllow(allow); err != nil {
		return Result{}, err
	}
	if res.DenyReasons, err = decodeReasons(reasons); err != nil {
		return Result{}, err
	}
	res.DecisionID = NewDecisionID()
	return res, nil
}

// decide runs the decision query and returns the values of allow and
// deny_reasons, nil for undefined. The fast query has a result only when
// both rules are defined, which a policy with `default allow := false` and
// a deny_reasons rule always has; otherwise the full query, which tells
// each undefined rule apart, runs.
func (s *Set) decide(ctx context.Context, args *evalArgs) (allow, reasons ast.Value, err error) {
	n, a, r, err := s.fast.run(ctx, s.compiler, args)
	if err != nil {
		return nil, nil, reason.Wrap(reason.PolicyError, err, "evaluate policy")
	}
	switch n {
	case 1:
		return valueOf(a), valueOf(r), nil
	case 0:
	default:
		return nil, nil, reason.New(reason.PolicyError, "decision query returned %d results", n)
	}
	if n, a, r, err = s.full.run(ctx, s.compiler, args); err != nil {
		return nil, nil, reason.Wrap(reason.PolicyError, err, "evaluate policy")
	}
	if n != 1 {
		return nil, nil, reason.New(reason.PolicyError, "decision query returned %d results", n)
	}
	return firstOf(a), firstOf(r), nil
}

func valueOf(t *ast.Term) ast.Value {
	if t == nil {
		return nil
	}
	return t.Value
}

// firstOf unwraps a binding of the full query: an array holding the rule's
// value, or empty when the rule is undefined.
func firstOf(b *ast.Term) ast.Value {
	if b == nil {
		return nil
	}
	if arr, ok := b.Value.(*ast.Array); ok && arr.Len() > 0 {
		return arr.Elem(0).Value
	}
	return nil
}

// decodeAllow reads allow: nil (undefined) is false, anything but a
// boolean is an error.
func decodeAllow(v ast.Value) (bool, error) {
	if v == nil {
		return false, nil
	}
	b, ok := v.(ast.Boolean)
	if !ok {
		return false, reason.New(reason.PolicyError, "%s.allow must be a boolean, got %s", Package, ast.ValueName(v))
	}
	return bool(b), nil
}

// decodeReasons reads deny_reasons: nil (undefined) is empty; otherwise a
// set or array of strings.
func decodeReasons(v ast.Value) ([]string, error) {
	if v == nil {
		return []string{}, nil
	}
	// An allowed request has no reasons: no need for the collector below,
	// which escapes to the heap with what it captures.
	switch x := v.(type) {
	case ast.Set:
		if x.Len() == 0 {
			return []string{}, nil
		}
	case *ast.Array:
		if x.Len() == 0 {
			return []string{}, nil
		}
	}
	var (
		out []string
		bad ast.Value
	)
	collect := func(t *ast.Term) {
		if s, ok := t.Value.(ast.String); ok {
			out = append(out, string(s))
		} else if bad == nil {
			bad = t.Value
		}
	}
	switch v := v.(type) {
	case ast.Set:
		out = make([]string, 0, v.Len())
		v.Foreach(collect)
	case *ast.Array:
		out = make([]string, 0, v.Len())
		v.Foreach(collect)
	default:
		return nil, reason.New(reason.PolicyError, "%s.deny_reasons must be a set of strings, got %s", Package, ast.ValueName(v))
	}
	if bad != nil {
		return nil, reason.New(reason.PolicyError, "%s.deny_reasons must hold only strings, got a %s", Package, ast.ValueName(bad))
	}
	slices.Sort(out)
	return out, nil
}
