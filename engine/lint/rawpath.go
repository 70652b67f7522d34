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
		check := func(op *ast.Term, args []*ast.Term, loc *ast.Location) {
			name := op.String()
			if !pathComparisons[name] {
				return
			}
			for _, a := range args {
				if ref, ok := inputRef(aliases, a); ok && ref.Equal(rawPath) {
					if a.Location != nil {
						loc = a.Location
					}
					out = append(out, at(m.name, loc, Warning, RuleRawPathComparison,
						"input.request.path is compared with %s; \"/API/x\", \"/x.json\", \"/%%78\" and \"/a/../x\" spell the same route differently: compare input.request.canonical_path, or gate on input.action",
						displayName(name)))
					return
				}
			}
		}
		ast.WalkExprs(m.mod, func(e *ast.Expr) bool {
			if terms, ok := e.Terms.([]*ast.Term); ok && len(terms) > 0 {
				check(terms[0], terms[1:], e.Location)
			}
			return false
		})
		ast.WalkTerms(m.mod, func(t *ast.Term) bool {
			if call, ok := t.Value.(ast.Call); ok && len(call) > 0 {
				check(call[0], call[1:], t.Location)
			}
			return false
		})
	}
	return out
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
