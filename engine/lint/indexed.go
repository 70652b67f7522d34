package lint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// indexMatters is the size from which a rule set's indexing decides its
// cost: OPA evaluates the rules of a set its rule index cannot rule out
// for every query that reads the set, so an unindexed rule among this many
// is evaluated for every query, and a policy of generated rules (a rule
// per route or per role) grows in cost with every rule it gains.
const indexMatters = 8

// indexProbe is the value of every input and data field when the rule
// index is asked which rules it cannot rule out: no constant of a policy
// equals it, so the rules a lookup still returns have no condition the
// index can test.
var indexProbe = ast.String("\x00svc-lint-index-probe")

type probeResolver struct{}

func (probeResolver) Resolve(ast.Ref) (ast.Value, error) { return indexProbe, nil }

// checkIndexed applies rule-not-indexed with OPA's own rule index, as the
// compiler c built it: a rule that a lookup with every field set to a
// value no rule tests for still returns is one that no condition of the
// index narrows (no input or data field compared with a constant by ==,
// in, startswith, endswith or glob.match, as OPA v1 indexes them). It
// is reported when its rule set has indexMatters rules or more: then the
// set's indexing is what it costs, and this rule is evaluated for every
// query. Functions are not
// checked: their arguments, not the input, select them.
func checkIndexed(c *ast.Compiler) []Finding {
	if c == nil {
		return nil
	}
	var out []Finding
	c.RuleTree.DepthFirst(func(node *ast.TreeNode) bool {
		if node.Index == nil || len(node.Values) == 0 {
			return false
		}
		var rules []*ast.Rule
		for _, r := range node.Values {
			if !r.Default && len(r.Head.Args) == 0 {
				rules = append(rules, r)
			}
		}
		if len(rules) < 2 {
			return false
		}
		res, err := node.Index.Lookup(probeResolver{})
		if err != nil {
			return false
		}
		unindexed := res.Rules
		if len(rules) < indexMatters || len(unindexed) == 0 {
			return false
		}
		name := strings.TrimPrefix(rules[0].Ref().String(), "data.")
		if p := rules[0].Module; p != nil {
			name = strings.TrimPrefix(p.Package.Path.String(), "data.") + "." + rules[0].Head.Ref().String()
		}
		for _, r := range unindexed {
			if !slices.Contains(rules, r) {
				continue
			}
			file := ""
			if r.Location != nil {
				file = r.Location.File
			}
			out = append(out, at(file, r.Location, Warning, RuleNotIndexed,
				"OPA's rule index cannot rule this rule out: none of its conditions tests an input or data field against a constant in a way the index uses (==, in, startswith, endswith, glob.match), so it is evaluated for every query of %s (%d rules, %d of them like this one)",
				name, len(rules), len(unindexed)))
		}
		return false
	})
	return out
}

// ruleNotIndexedSummary is the summary Rules gives for RuleNotIndexed.
var ruleNotIndexedSummary = fmt.Sprintf("rule that OPA's rule index cannot rule out, in a set of %d rules or more: it is evaluated for every query", indexMatters)
