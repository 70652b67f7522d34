package policy

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/svc-dev/svc/internal/digestcache"
	"github.com/svc-dev/svc/plan"
	"github.com/svc-dev/svc/reason"
)

// ResourcePlan is the policy's answer to "which resources of a type may
// this input's caller act on?".
type ResourcePlan struct {
	// Kind is AlwaysAllowed, AlwaysDenied or Conditional.
	Kind plan.Kind
	// Condition is set for Conditional: the resources it holds for are
	// those allow permits. It is shared between callers: read-only.
	Condition *plan.Condition
	// Revision is the revision of the set that planned.
	Revision string
}

// planQuery is the query a plan partially evaluates: allow alone, since
// deny_reasons never changes a decision.
const planQuery = "data.svc.authz.allow == true"

// PlanCacheSize is the most plans one Set keeps.
const PlanCacheSize = 4096

// planUnknowns are the parts of the input a plan leaves open: what
// differs from one resource to the next.
var planUnknowns = []*ast.Term{
	ast.MustParseTerm("input.resource.id"),
	ast.MustParseTerm("input.resource.tenant"),
	ast.MustParseTerm("input.resource.attributes"),
}

// resourcePlans prepares the partial evaluation once per Set and caches
// its plans.
type resourcePlans struct {
	once     sync.Once
	prepared rego.PreparedPartialQuery
	err      error
	cache    *digestcache.Cache[ResourcePlan]
}

// PlanResources partially evaluates allow on in with the resource's id,
// tenant and attributes unknown: everything else of in — user,
// identity, tenant, action and in.Resource.Type — is known. Plans are
// cached per known input. Failures are *reason.Error:
// reason.InputInvalid for an input that cannot be converted,
// reason.PlanUnsupported for a policy the plan cannot express (the
// message names the rule and line), reason.PolicyError when the
// evaluation fails.
func (s *Set) PlanResources(ctx context.Context, in Input) (ResourcePlan, error) {
	in.Resource = Resource{Type: in.Resource.Type}
	text, err := json.Marshal(&in)
	if err != nil {
		return ResourcePlan{}, reason.Wrap(reason.InputInvalid, err, "convert policy input")
	}
	rp, err := s.resourcePlans()
	if err != nil {
		return ResourcePlan{}, err
	}
	key := sha256.Sum256(text)
	if p, ok := rp.cache.Get(&key); ok {
		return p, nil
	}
	rp.cache.Miss(&key)
	epoch := rp.cache.Epoch()
	v, err := in.Value()
	if err != nil {
		return ResourcePlan{}, reason.Wrap(reason.InputInvalid, err, "convert policy input")
	}
	p, err := s.partialPlan(ctx, rp, v, in.Resource.Type)
	if err == nil {
		rp.cache.Put(&key, p, epoch, nil)
	}
	return p, err
}

// PlanValue is PlanResources on an input given as a JSON-like value, as
// EvalValue takes one; input.resource is replaced by {"type":
// resourceType}. It is not cached.
func (s *Set) PlanValue(ctx context.Context, input any, resourceType string) (ResourcePlan, error) {
	v, err := inputValue(input)
	if err != nil {
		return ResourcePlan{}, err
	}
	rp, err := s.resourcePlans()
	if err != nil {
		return ResourcePlan{}, err
	}
	return s.partialPlan(ctx, rp, v, resourceType)
}

// resourcePlans prepares the plan query on first use: sets that are
// never asked for a plan spend nothing on it.
func (s *Set) resourcePlans() (*resourcePlans, error) {
	rp := s.resPlans
	rp.once.Do(func() {
		rp.cache = digestcache.New[ResourcePlan](PlanCacheSize)
		rp.prepared, rp.err = rego.New(
			rego.Query(planQuery),
			rego.Compiler(s.compiler),
			rego.Store(s.store),
		).PrepareForPartial(context.Background())
	})
	if rp.err != nil {
		return nil, reason.Wrap(reason.PolicyError, rp.err, "prepare the plan query")
	}
	return rp, nil
}

// partialPlan partially evaluates the plan query on input v, whose resource is
// replaced by one of type typ with everything else unknown.
func (s *Set) partialPlan(ctx context.Context, rp *resourcePlans, v ast.Value, typ string) (ResourcePlan, error) {
	// The unknowns must not be in the input at all: Value writes the
	// resource's id and tenant even when empty.
	v, err := withResource(v, typ)
	if err != nil {
		return ResourcePlan{}, reason.Wrap(reason.InputInvalid, err, "convert policy input")
	}
	pq, err := rp.prepared.Partial(ctx,
		rego.EvalParsedInput(v),
		rego.EvalParsedUnknowns(planUnknowns),
		rego.EvalTransaction(s.txn),
	)
	if err != nil {
		return ResourcePlan{}, reason.Wrap(reason.PolicyError, err, "plan evaluation failed")
	}
	t := translator{set: s, support: supportRules(pq.Support)}
	p, err := t.plan(pq.Queries)
	if err != nil {
		return ResourcePlan{}, err
	}
	p.Revision = s.revision
	return p, nil
}

// withResource is input v with input.resource replaced by {"type": typ}
// (an empty object when typ is "").
func withResource(v ast.Value, typ string) (ast.Value, error) {
	obj, ok := v.(ast.Object)
	if !ok {
		return nil, fmt.Errorf("input is not an object")
	}
	res := ast.NewObject()
	if typ != "" {
		res.Insert(keyType, ast.StringTerm(typ))
	}
	out := ast.NewObject()
	obj.Foreach(func(k, x *ast.Term) {
		if k.Equal(keyResource) {
			x = ast.NewTerm(res)
		}
		out.Insert(k, x)
	})
	return out, nil
}

// supportRules indexes the rules partial evaluation could not inline
// (negations, mostly) by their path, so that a query's reference to one
// can be expanded.
func supportRules(mods []*ast.Module) map[string][]*ast.Rule {
	out := map[string][]*ast.Rule{}
	for _, m := range mods {
		for _, r := range m.Rules {
			path := r.Ref().GroundPrefix()
			full := m.Package.Path.Extend(path).String()
			out[full] = append(out[full], r)
		}
	}
	return out
}

// translator turns the queries of a partial evaluation into a condition
// tree.
type translator struct {
	set     *Set
	support map[string][]*ast.Rule
	// depth counts support rules being expanded, to refuse a cycle.
	depth int
}

// maxSupportDepth bounds nested support rule expansions.
const maxSupportDepth = 16

func (t *translator) plan(queries []ast.Body) (ResourcePlan, error) {
	if len(queries) == 0 {
		return ResourcePlan{Kind: plan.AlwaysDenied}, nil
	}
	c, err := t.disjunction(queries)
	if err != nil {
		return ResourcePlan{}, err
	}
	c = simplify(c)
	switch {
	case c.Op == plan.And && len(c.Args) == 0:
		return ResourcePlan{Kind: plan.AlwaysAllowed}, nil
	case c.Op == plan.Or && len(c.Args) == 0:
		return ResourcePlan{Kind: plan.AlwaysDenied}, nil
	}
	return ResourcePlan{Kind: plan.Conditional, Condition: c}, nil
}

// disjunction is queries joined by or, each the and of its expressions.
func (t *translator) disjunction(queries []ast.Body) (*plan.Condition, error) {
	or := &plan.Condition{Op: plan.Or}
	for _, q := range queries {
		and := &plan.Condition{Op: plan.And}
		for _, e := range q {
			c, err := t.expr(e)
			if err != nil {
				return nil, err
			}
			and.Args = append(and.Args, c)
		}
		or.Args = append(or.Args, and)
	}
	return or, nil
}

// expr translates one expression of a query.
func (t *translator) expr(e *ast.Expr) (*plan.Condition, error) {
	if e.Negated {
		pos := e.Copy()
		pos.Negated = false
		c, err := t.expr(pos)
		if err != nil {
			return nil, err
		}
		not := &plan.Condition{Op: plan.Not, Arg: c}
		defined := t.evaluatedBeforeNot(e)
		if len(defined) == 0 {
			return not, nil
		}
		return &plan.Condition{Op: plan.And, Args: append(defined, not)}, nil
	}
	if len(e.With) > 0 {
		return nil, t.unsupported(e, "a with modifier")
	}
	switch {
	case e.IsCall():
		return t.call(e)
	}
	term, ok := e.Terms.(*ast.Term)
	if !ok {
		return nil, t.unsupported(e, "an expression of this kind")
	}
	switch x := term.Value.(type) {
	case ast.Boolean:
		if x {
			return &plan.Condition{Op: plan.And}, nil
		}
		return &plan.Condition{Op: plan.Or}, nil
	case ast.Ref:
		if rules, ok := t.support[x.String()]; ok {
			return t.expand(e, rules)
		}
		if _, ok := fieldOf(x); ok {
			return nil, t.unsupported(e, "a resource field used as a condition on its own (compare it: == true)")
		}
	}
	return nil, t.unsupported(e, "an expression of this kind")
}

// evaluatedBeforeNot is, for a negated call, the conditions that its
// attribute operands are present. Rego's compiler evaluates the
// reference arguments of a built-in call (every one but unification;
// == is unification) before the negation: `not startswith(x, "a")` and
// `not x < 3` are false, not true, for a resource without x. id and
// tenant are always present.
func (t *translator) evaluatedBeforeNot(e *ast.Expr) []*plan.Condition {
	if !e.IsCall() {
		return nil
	}
	if name := e.Operator().String(); name == ast.Equality.Name || name == ast.Equal.Name {
		return nil
	}
	var out []*plan.Condition
	seen := map[string]bool{}
	for _, op := range e.Operands() {
		f, ok := t.field(op)
		if ok && strings.HasPrefix(f, plan.AttributePrefix) && !seen[f] {
			seen[f] = true
			out = append(out, &plan.Condition{Op: plan.Ne, Field: f, Value: nil})
		}
	}
	return out
}

// expand is a reference to support rules: true when the body of one of
// them holds. Only rules of value true are expanded.
func (t *translator) expand(e *ast.Expr, rules []*ast.Rule) (*plan.Condition, error) {
	if t.depth >= maxSupportDepth {
		return nil, t.unsupported(e, "rules nested too deeply")
	}
	t.depth++
	defer func() { t.depth-- }()
	var bodies []ast.Body
	for _, r := range rules {
		if r.Default || len(r.Head.Args) > 0 || r.Else != nil ||
			r.Head.Value == nil || !r.Head.Value.Equal(ast.BooleanTerm(true)) {
			return nil, t.unsupported(e, "a rule whose value depends on the resource")
		}
		bodies = append(bodies, r.Body)
	}
	return t.disjunction(bodies)
}

// comparisons maps the built-ins a plan can express to their operator,
// with the operands in the order written.
var comparisons = map[string]plan.Op{
	ast.Equality.Name: plan.Eq, // unification, =
	ast.Equal.Name:    plan.Eq, // ==
	ast.NotEqual.Name: plan.Ne,
	ast.LessThan.Name: plan.Lt, ast.LessThanEq.Name: plan.Le,
	ast.GreaterThan.Name: plan.Gt, ast.GreaterThanEq.Name: plan.Ge,
}

// flipped is the operator that holds with the operands swapped.
var flipped = map[plan.Op]plan.Op{plan.Eq: plan.Eq, plan.Ne: plan.Ne, plan.Lt: plan.Gt, plan.Le: plan.Ge, plan.Gt: plan.Lt, plan.Ge: plan.Le}

func (t *translator) call(e *ast.Expr) (*plan.Condition, error) {
	name := e.Operator().String()
	ops := e.Operands()
	if name == ast.Member.Name && len(ops) == 2 {
		// x in collection, with x the resource's field.
		return t.member(e, ops[0], ops[1])
	}
	if op, ok := stringTests[name]; ok && len(ops) == 2 {
		return t.stringTest(e, name, op, ops[0], ops[1])
	}
	op, ok := comparisons[name]
	if !ok || len(ops) != 2 {
		return nil, t.unsupported(e, "the built-in "+name)
	}
	field, fok := t.field(ops[0])
	other := ops[1]
	if !fok {
		if field, fok = t.field(ops[1]); !fok {
			return nil, t.unsupported(e, "a comparison that involves no field of the resource")
		}
		other, op = ops[0], flipped[op]
	}
	if _, both := t.field(other); both {
		return nil, t.unsupported(e, "a comparison of two fields of the resource")
	}
	v, err := t.scalar(e, other)
	if err != nil {
		return nil, err
	}
	if v == nil && op != plan.Eq && op != plan.Ne {
		return nil, t.unsupported(e, "an ordering against null")
	}
	if v == nil && op == plan.Eq {
		// A row's NULL column is an attribute left out of the input, and
		// a missing attribute makes "== null" undefined: no row meets
		// it. ("!= null" holds for a present value: IS NOT NULL.)
		return &plan.Condition{Op: plan.Or}, nil
	}
	return &plan.Condition{Op: op, Field: field, Value: v}, nil
}

// stringTests maps the string built-ins a plan can express to their
// operator: startswith(s, prefix), endswith(s, suffix), contains(s, sub).
var stringTests = map[string]plan.Op{
	ast.StartsWith.Name: plan.StartsWith,
	ast.EndsWith.Name:   plan.EndsWith,
	ast.Contains.Name:   plan.Contains,
}

// stringTest is startswith, endswith or contains (name) of s and sub,
// with s a field of the resource and sub known. The other order (a
// field as the prefix, suffix or substring of a known string) is no
// condition on a column the tree can hold.
func (t *translator) stringTest(e *ast.Expr, name string, op plan.Op, s, sub *ast.Term) (*plan.Condition, error) {
	field, ok := t.field(s)
	if _, subField := t.field(sub); subField {
		if ok {
			return nil, t.unsupported(e, name+" of two fields of the resource")
		}
		return nil, t.unsupported(e, name+" with a field of the resource as its second argument "+
			"(a plan expresses "+name+"(<resource field>, <known string>) only)")
	}
	if !ok {
		return nil, t.unsupported(e, name+" of something other than the resource's id, tenant or one attribute")
	}
	v, err := t.scalar(e, sub)
	if err != nil {
		return nil, err
	}
	str, isString := v.(string)
	if !isString {
		// The built-in fails on an operand that is not a string: the
		// expression is undefined, as false, for every resource.
		return &plan.Condition{Op: plan.Or}, nil
	}
	return &plan.Condition{Op: op, Field: field, Value: str}, nil
}

func (t *translator) member(e *ast.Expr, x, coll *ast.Term) (*plan.Condition, error) {
	field, ok := t.field(x)
	if !ok {
		return nil, t.unsupported(e, "membership of something other than a field of the resource in a known collection")
	}
	var elems []*ast.Term
	switch c := coll.Value.(type) {
	case ast.Set:
		elems = c.Slice()
	case *ast.Array:
		for i := range c.Len() {
			elems = append(elems, c.Elem(i))
		}
	case ast.Object:
		// x in object tests the object's values.
		c.Foreach(func(_, v *ast.Term) { elems = append(elems, v) })
	default:
		return nil, t.unsupported(e, "membership in a collection that is not known")
	}
	vals := make([]any, 0, len(elems))
	for _, el := range elems {
		v, err := t.scalar(e, el)
		if err != nil {
			return nil, err
		}
		if v == nil {
			// No row holds a present null: a NULL column is a missing
			// attribute, which is in no collection.
			continue
		}
		vals = append(vals, v)
	}
	return &plan.Condition{Op: plan.In, Field: field, Values: vals}, nil
}

// field is the plan field a term refers to: input.resource.id,
// input.resource.tenant or input.resource.attributes.<name>.
func (t *translator) field(x *ast.Term) (string, bool) {
	ref, ok := x.Value.(ast.Ref)
	if !ok {
		return "", false
	}
	return fieldOf(ref)
}

var inputResource = ast.MustParseRef("input.resource")

func fieldOf(ref ast.Ref) (string, bool) {
	if !ref.HasPrefix(inputResource) || len(ref) < 3 {
		return "", false
	}
	key, ok := ref[2].Value.(ast.String)
	if !ok {
		return "", false
	}
	switch {
	case len(ref) == 3 && (key == "id" || key == "tenant"):
		return string(key), true
	case len(ref) == 4 && key == "attributes":
		name, ok := ref[3].Value.(ast.String)
		if ok && name != "" {
			return plan.AttributePrefix + string(name), true
		}
	}
	return "", false
}

// scalar is a known operand as a condition's value.
func (t *translator) scalar(e *ast.Expr, x *ast.Term) (any, error) {
	switch v := x.Value.(type) {
	case ast.String:
		return string(v), nil
	case ast.Number:
		if !exactAsDouble(string(v)) {
			return nil, t.unsupported(e, "the number "+string(v)+", which a double cannot carry exactly "+
				"(SQL parameters and the API's JSON numbers are doubles, and the rows compared with a rounded bound would differ from the policy's answer)")
		}
		return json.Number(v), nil
	case ast.Boolean:
		return bool(v), nil
	case ast.Null:
		return nil, nil
	case ast.Ref:
		if _, ok := fieldOf(v); ok || v.HasPrefix(inputResource) {
			return nil, t.unsupported(e, "a reference to the resource other than its id, tenant or one attribute")
		}
	case ast.Var:
		return nil, t.unsupported(e, "a value bound elsewhere in the rule")
	}
	return nil, t.unsupported(e, "a comparison with a value that is not a string, number, boolean or null")
}

// exactAsDouble reports whether the decimal number s is the one that its
// nearest double reads back as: 0.1 and 9007199254740992 are, while
// 9007199254740993 and 9007199254740993.5 are not, and a bound rounded
// to its double would let a plan list rows the policy denies.
func exactAsDouble(s string) bool {
	want, ok := new(big.Rat).SetString(s)
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	got, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return ok && got.Cmp(want) == 0
}

// unsupported is the plan-unsupported error of e: what the plan cannot
// express and where the policy says it.
func (t *translator) unsupported(e *ast.Expr, what string) error {
	where := "the policy"
	if loc := e.Location; loc != nil {
		where = fmt.Sprintf("%s:%d", loc.File, loc.Row)
		if rule := t.set.ruleAt(loc); rule != "" {
			where = "rule " + rule + " at " + where
		}
	}
	return reason.New(reason.PlanUnsupported, "%s: a resource plan cannot express %s in %s", where, what, e)
}

// ruleAt names the rule whose source holds loc, or "".
func (s *Set) ruleAt(loc *ast.Location) string {
	m := s.modules[loc.File]
	if m == nil {
		return ""
	}
	name, best := "", 0
	for _, r := range m.Rules {
		if r.Location != nil && r.Location.Row <= loc.Row && r.Location.Row >= best {
			best = r.Location.Row
			name = r.Head.Ref().String()
		}
	}
	return name
}

// simplify flattens nested and/or, drops repeated arguments, and folds
// the constants: an and without arguments is true, an or without
// arguments false.
func simplify(c *plan.Condition) *plan.Condition {
	switch c.Op {
	case plan.Not:
		arg := simplify(c.Arg)
		if arg.Op == plan.Not {
			// not not x is x only where x is never missing: keep it.
			return &plan.Condition{Op: plan.Not, Arg: arg}
		}
		if isTrue(arg) {
			return &plan.Condition{Op: plan.Or}
		}
		if isFalse(arg) {
			return &plan.Condition{Op: plan.And}
		}
		return &plan.Condition{Op: plan.Not, Arg: arg}
	case plan.And, plan.Or:
		out := &plan.Condition{Op: c.Op}
		seen := map[string]bool{}
		for _, a := range c.Args {
			a = simplify(a)
			switch {
			case c.Op == plan.And && isTrue(a), c.Op == plan.Or && isFalse(a):
				continue
			case c.Op == plan.And && isFalse(a):
				return &plan.Condition{Op: plan.Or}
			case c.Op == plan.Or && isTrue(a):
				return &plan.Condition{Op: plan.And}
			}
			args := []*plan.Condition{a}
			if a.Op == c.Op {
				args = a.Args
			}
			for _, x := range args {
				b, _ := x.MarshalJSON()
				if k := string(b); !seen[k] {
					seen[k] = true
					out.Args = append(out.Args, x)
				}
			}
		}
		if c.Op == plan.And {
			out.Args = pruneImplied(out.Args)
			if out.Args == nil {
				return &plan.Condition{Op: plan.Or}
			}
		}
		if len(out.Args) == 1 {
			return out.Args[0]
		}
		return out
	}
	return c
}

// pruneImplied drops from the arguments of an and each "field ne w" that
// a "field eq v" among them implies (v a string or boolean other than
// w), as partial evaluation leaves `owner != ""` beside `owner ==
// "alice"`. It returns nil when two of them contradict (eq v with ne v,
// or eq v with eq w): the and is false. Numbers are left alone: 3 and 3.0
// are equal in Rego and different as JSON.
func pruneImplied(args []*plan.Condition) []*plan.Condition {
	eqs := map[string]any{}
	for _, a := range args {
		if a.Op != plan.Eq || !plainValue(a.Value) {
			continue
		}
		if v, ok := eqs[a.Field]; ok && v != a.Value {
			return nil
		}
		eqs[a.Field] = a.Value
	}
	// Not nil, even when empty: an and whose arguments were all true is
	// true, and nil says false.
	out := make([]*plan.Condition, 0, len(args))
	for _, a := range args {
		if v, ok := eqs[a.Field]; ok && a.Op == plan.Ne && plainValue(a.Value) {
			if v == a.Value {
				return nil
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

func plainValue(v any) bool {
	switch v.(type) {
	case string, bool:
		return true
	}
	return false
}

func isTrue(c *plan.Condition) bool  { return c.Op == plan.And && len(c.Args) == 0 }
func isFalse(c *plan.Condition) bool { return c.Op == plan.Or && len(c.Args) == 0 }
