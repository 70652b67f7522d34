package lint

import (
	"maps"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// shape is the kind of a node of the policy input.
type shape int

const (
	scalar shape = iota // a string: nothing below it
	object              // fixed fields
	list                // an array of scalars
	dict                // any keys, scalar values (query, headers)
	open                // anything below (user.claims)
)

// node is one node of the policy input's shape.
type node struct {
	shape  shape
	fields map[string]*node
}

func obj(fields map[string]*node) *node { return &node{shape: object, fields: fields} }

var (
	str       = &node{shape: scalar}
	strList   = &node{shape: list}
	strDict   = &node{shape: dict}
	anything  = &node{shape: open}
	inputRoot = obj(map[string]*node{
		"action": str,
		"user": obj(map[string]*node{
			"id": str, "role": str, "roles": strList, "tenant_id": str, "email": str, "claims": anything,
		}),
		"resource": obj(map[string]*node{"type": str, "id": str, "tenant": str, "attributes": anything}),
		"tenant":   obj(map[string]*node{"id": str, "plan": str}),
		"request": obj(map[string]*node{
			"method": str, "path": str, "host": str, "query": strDict, "headers": strDict,
			"source_ip": str, "canonical_path": str, "format": str,
		}),
		"identity": obj(map[string]*node{
			"kind": str, "id": str, "tenant_id": str, "roles": strList, "issuer": str, "method": str, "claims": anything,
		}),
	})
)

// checkInputRefs applies unknown-input-field: every reference into input,
// directly or through an import alias, must follow the shape of the
// policy input (spec "Policy input", with user.roles, user.email,
// resource.type, request and identity). A dynamic key (input.user[k]) ends the
// check of that reference, since any field may be meant.
func checkInputRefs(mods []*module) []Finding {
	var out []Finding
	for _, m := range mods {
		if m.mod == nil {
			continue
		}
		aliases := inputAliases(m.mod)
		ast.WalkTerms(m.mod, func(t *ast.Term) bool {
			ref, ok := inputRef(aliases, t)
			if !ok {
				return false
			}
			if msg := inputProblem(ref); msg != "" {
				out = append(out, at(m.name, t.Location, Warning, RuleUnknownInputField, "%s", msg))
			}
			return false
		})
	}
	return out
}

// inputAliases maps the names that imports of input give (import
// input.request as req) to the reference each stands for.
func inputAliases(mod *ast.Module) map[ast.Var]ast.Ref {
	aliases := map[ast.Var]ast.Ref{}
	for _, imp := range mod.Imports {
		ref, ok := imp.Path.Value.(ast.Ref)
		if !ok || !ref.HasPrefix(ast.InputRootRef) || len(ref) < 2 {
			continue
		}
		alias := imp.Alias
		if alias == "" {
			if s, ok := ref[len(ref)-1].Value.(ast.String); ok {
				alias = ast.Var(s)
			}
		}
		aliases[alias] = ref
	}
	return aliases
}

// inputRef returns the reference into input that t is, written from
// input even when t goes through an import alias; ok is false for any
// other term.
func inputRef(aliases map[ast.Var]ast.Ref, t *ast.Term) (ast.Ref, bool) {
	ref, ok := t.Value.(ast.Ref)
	if !ok {
		return nil, false
	}
	head, ok := ref[0].Value.(ast.Var)
	if !ok {
		return nil, false
	}
	switch prefix, aliased := aliases[head]; {
	case head.Equal(ast.InputRootDocument.Value):
		return ref, true
	case aliased:
		return prefix.Concat(ref[1:]), true
	}
	return nil, false
}

// inputProblem walks ref (which starts at input) along the input's shape
// and says where it leaves it, or "" when it does not.
func inputProblem(ref ast.Ref) string {
	n := inputRoot
	for i := 1; i < len(ref); i++ {
		here := ref[:i].String()
		key, isString := ref[i].Value.(ast.String)
		switch n.shape {
		case open:
			return ""
		case scalar:
			return here + " is a string; it has no " + ref[i].String() + " inside"
		case list, dict:
			if n.shape == list && isString {
				return here + " is an array; index it with a number, not " + ref[i].String()
			}
			n = str
		case object:
			if !isString {
				return "" // dynamic key: any field may be meant
			}
			next, ok := n.fields[string(key)]
			if !ok {
				return ref[:i+1].String() + " is not a field of the policy input (" + here + " has " + strings.Join(slices.Sorted(maps.Keys(n.fields)), ", ") + ")"
			}
			n = next
		}
	}
	return ""
}
