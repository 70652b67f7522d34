package policy

import "github.com/open-policy-agent/opa/v1/ast"

// constantRules are the values of a set's constant rules: a table such
// as `role_permissions := {...}`, whose value is the same for every input.
// topdown evaluates such a rule on every evaluation that reads it, then
// caches its value in the rule cache for the rest of that evaluation; the
// set instead hands each evaluation a rule cache that already holds those
// values, computed once when the set is built, so topdown finds them
// there. A rule qualifies only when its value cannot depend on anything:
// the only rule at its path, with no rule below that path, complete, not
// a function, without default or else, a ground value, and a body that is
// just `true` (what `name := value` compiles to). The values are read,
// never written, by concurrent evaluations.
type constantRules struct {
	index   map[uint64][]int
	entries []ruleEntry
}

func findConstantRules(c *ast.Compiler) *constantRules {
	cr := &constantRules{index: map[uint64][]int{}}
	var walk func(n *ast.TreeNode)
	walk = func(n *ast.TreeNode) {
		if len(n.Values) == 1 && len(n.Children) == 0 {
			if r := n.Values[0]; constantRule(r) {
				path := r.Ref()
				h := refHash(path)
				cr.index[h] = append(cr.index[h], len(cr.entries))
				cr.entries = append(cr.entries, ruleEntry{ref: path, value: r.Head.Value})
			}
		}
		for _, child := range n.Children {
			walk(child)
		}
	}
	if c.RuleTree != nil {
		walk(c.RuleTree)
	}
	if len(cr.entries) == 0 {
		return nil
	}
	return cr
}

func constantRule(r *ast.Rule) bool {
	if r.Default || r.Else != nil || len(r.Head.Args) > 0 || r.Head.RuleKind() != ast.SingleValue ||
		r.Head.Value == nil || !r.Head.Value.IsGround() || !r.Ref().IsGround() || len(r.Body) != 1 {
		return false
	}
	e := r.Body[0]
	t, ok := e.Terms.(*ast.Term)
	return ok && !e.Negated && len(e.With) == 0 && ast.Boolean(true).Equal(t.Value)
}

// find returns the entry of a constant rule at ref, nil when there is none.
func (cr *constantRules) find(ref ast.Ref, h uint64) *ruleEntry {
	for _, i := range cr.index[h] {
		if cr.entries[i].ref.Equal(ref) {
			return &cr.entries[i]
		}
	}
	return nil
}
