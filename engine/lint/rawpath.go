package lint

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// rawPath is the reference raw-path-comparison looks for.
var rawPath = ast.MustParseRef("input.request.path")

// pathComparisons are the built-ins that compare a string, or test it
// against a pattern, by the name OPA gives their call. "==", "!=", "="
// and "in" are calls too (equal, neq, eq, internal.member_2).
var pathComparisons = map[string]bool{
	"equal": true, "neq": true, "eq": true, "internal.member_2": true,
	"startswith": true, "endswith": true, "contains": true, "indexof": true, "indexof_n": true,
	"strings.any_prefix_match": true, "strings.any_suffix_match": true,
	"regex.match": true, "re_match": true, "regex.find_n": true, "regex.find_all_string_submatch_n": true,
	"regex.globs_match": true, "glob.match": true,
}

// checkRawPath applies raw-path-comparison: a call of one of
// pathComparisons with input.request.path as an argument. The path is
// the one the client wrote; a gate on "/api/reports/export" in it lets
// "/API/reports/Export", "/api/reports/export.json",
// "/api/reports/%65xport" and "/api/x/../reports/export" through, all of
// which an upstream may serve as the gated route.
// input.request.canonical_path spells every one of them alike.
func checkRawPath(mods []*module) []Finding {
	var out []Finding
	for _, m := range mods {
		if m.mod == nil {
			continue
		}
		aliases := inputAliases(m.mod)
		rules := rawPathRules(m.mod, aliases)
		for _, r := range m.mod.Rules {
			raw := rawTaint{aliases: aliases, vars: map[ast.Var]bool{}}
			for name := range rules {
				raw.vars[name] = true
			}
			raw.bind(r)
			out = append(out, raw.comparisons(m.name, r)...)
		}
	}
	return out
}

// rawTaint says which terms of a rule hold the raw path: the reference
// itself (through an import alias too), a variable bound to such a term
// (p := input.request.path), a rule of the package whose value is one
// (path := input.request.path), and a string built-in applied to one
// (lower, trim_suffix, urlquery.decode: none of them gives the route's
// one spelling).
type rawTaint struct {
	aliases map[ast.Var]ast.Ref
	vars    map[ast.Var]bool
}

// pathTransforms are the string built-ins whose result still spells the
// route as the client did.
var pathTransforms = map[string]bool{
	"lower": true, "upper": true, "trim": true, "trim_left": true, "trim_right": true, "trim_prefix": true,
	"trim_suffix": true, "trim_space": true, "replace": true, "strings.replace_n": true, "substring": true,
	"urlquery.decode": true, "sprintf": true, "concat": true,
}

func (r rawTaint) holds(t *ast.Term) bool {
	switch v := t.Value.(type) {
	case ast.Var:
		return r.vars[v]
	case ast.Ref:
		if ref, ok := inputRef(r.aliases, t); ok {
			return ref.Equal(rawPath)
		}
		if len(v) == 1 {
			return r.holds(v[0])
		}
	case ast.Call:
		if len(v) > 0 && pathTransforms[v[0].String()] {
			for _, a := range v[1:] {
				if r.holds(a) {
					return true
				}
			}
		}
	}
	return false
}

// bind adds the variables of rule's bodies that are bound to the raw
// path (:= or = with a variable on one side), until no more are found.
func (r rawTaint) bind(rule *ast.Rule) {
	for changed := true; changed; {
		changed = false
		ast.WalkExprs(rule, func(e *ast.Expr) bool {
			terms, ok := e.Terms.([]*ast.Term)
			if !ok || len(terms) != 3 {
				return false
			}
			if op := terms[0].String(); op != "assign" && op != "eq" {
				return false
			}
			for _, side := range [2][2]*ast.Term{{terms[1], terms[2]}, {terms[2], terms[1]}} {
				v, isVar := side[0].Value.(ast.Var)
				if isVar && !v.IsWildcard() && !r.vars[v] && r.holds(side[1]) {
					r.vars[v] = true
					changed = true
				}
			}
			return false
		})
	}
}

// comparisons are the raw-path-comparison findings of rule: a call of
// one of pathComparisons with a term that holds the raw path as an
// argument. A binding (p := input.request.path) is not one.
func (r rawTaint) comparisons(file string, rule *ast.Rule) []Finding {
	var out []Finding
	check := func(op *ast.Term, args []*ast.Term, loc *ast.Location) {
		name := op.String()
		if !pathComparisons[name] {
			return
		}
		if name == "eq" && len(args) == 2 && r.holds(args[0]) && r.holds(args[1]) {
			return // p = input.request.path binds p
		}
		for _, a := range args {
			if r.holds(a) {
				if a.Location != nil {
					loc = a.Location
				}
				out = append(out, at(file, loc, Warning, RuleRawPathComparison,
					"input.request.path is compared with %s; \"/API/x\", \"/x.json\", \"/%%78\" and \"/a/../x\" spell the same route differently: compare input.request.canonical_path, or gate on input.action",
					displayName(name)))
				return
			}
		}
	}
	ast.WalkExprs(rule, func(e *ast.Expr) bool {
		if terms, ok := e.Terms.([]*ast.Term); ok && len(terms) > 0 {
			check(terms[0], terms[1:], e.Location)
		}
		return false
	})
	ast.WalkTerms(rule, func(t *ast.Term) bool {
		if call, ok := t.Value.(ast.Call); ok && len(call) > 0 {
			check(call[0], call[1:], t.Location)
		}
		return false
	})
	return out
}

// rawPathRules are the package's rules without arguments or body whose
// value holds the raw path (path := input.request.path), by name.
func rawPathRules(mod *ast.Module, aliases map[ast.Var]ast.Ref) map[ast.Var]bool {
	rules := map[ast.Var]bool{}
	raw := rawTaint{aliases: aliases, vars: rules}
	for changed := true; changed; {
		changed = false
		for _, rule := range mod.Rules {
			h := rule.Head
			if len(h.Args) > 0 || h.Value == nil || h.Key != nil || len(h.Ref()) != 1 {
				continue
			}
			name, ok := h.Ref()[0].Value.(ast.Var)
			if ok && !rules[name] && raw.holds(h.Value) {
				rules[name] = true
				changed = true
			}
		}
	}
	return rules
}

// displayName is how a policy writes the built-in called name.
func displayName(name string) string {
	switch name {
	case "equal":
		return "=="
	case "neq":
		return "!="
	case "eq":
		return "="
	case "internal.member_2":
		return "in"
	}
	return name
}
