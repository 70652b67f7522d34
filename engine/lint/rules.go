package lint

import (
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/types"
)

var (
	authzRef = ast.MustParseRef("data.svc.authz")
	svcRef   = ast.MustParseRef("data.svc")
)

// pkgName is the package of m as written ("svc.authz").
func pkgName(m *ast.Module) string { return strings.TrimPrefix(m.Package.Path.String(), "data.") }

func at(file string, loc *ast.Location, sev Severity, rule, format string, args ...any) Finding {
	f := Finding{File: file, Severity: sev, Rule: rule, Message: fmt.Sprintf(format, args...)}
	if loc != nil {
		f.Line, f.Col = loc.Row, loc.Col
	}
	return f
}

// checkPackages applies package-not-svc-authz: top-level modules must be
// package svc.authz, helpers in subdirectories must be under svc.
func checkPackages(mods []*module) []Finding {
	var out []Finding
	for _, m := range mods {
		if m.mod == nil {
			continue
		}
		path := m.mod.Package.Path
		switch topLevel := !strings.Contains(m.rel, "/"); {
		case topLevel && !path.Equal(authzRef):
			out = append(out, at(m.name, m.mod.Package.Location, Error, RulePackage,
				"package %s at the top of the policy directory; top-level modules must be package svc.authz (helper packages go in a subdirectory, under svc)", pkgName(m.mod)))
		case !topLevel && !path.HasPrefix(svcRef):
			out = append(out, at(m.name, m.mod.Package.Location, Error, RulePackage,
				"helper package %s is outside svc; use a package under svc (such as svc.lib.%s) so that bundles, rooted at svc, can hold it", pkgName(m.mod), lastSegment(path)))
		}
	}
	return out
}

func lastSegment(ref ast.Ref) string {
	if s, ok := ref[len(ref)-1].Value.(ast.String); ok {
		return string(s)
	}
	return "helpers"
}

// ruleName is the name of a rule whose head is a single name ("allow"),
// or "" for rules with a longer head ref (`deny_reasons.x := …`); for
// those, the first segment is in first.
func ruleName(r *ast.Rule) (name, first string) {
	ref := r.Head.Ref()
	if v, ok := ref[0].Value.(ast.Var); ok {
		first = string(v)
	}
	if len(ref) == 1 {
		name = first
	}
	return name, first
}

// checkDecision applies no-allow-rule, no-default-allow-false and
// deny-reasons-not-string-set to the modules of package svc.authz. types
// is the compiler's type environment, nil when compiling failed.
func checkDecision(mods []*module, types *ast.TypeEnv) []Finding {
	var (
		out         []Finding
		first       *module // first module of svc.authz, or of any package
		allows      []*ast.Rule
		defaults    []*ast.Rule
		allowFile   string
		reasonRules []ruleAt
	)
	for _, m := range mods {
		if m.mod == nil {
			continue
		}
		if first == nil {
			first = m
		}
		if !m.mod.Package.Path.Equal(authzRef) {
			continue
		}
		if !first.mod.Package.Path.Equal(authzRef) {
			first = m
		}
		for _, r := range m.mod.Rules {
			_, head := ruleName(r)
			switch head {
			case "allow":
				if r.Default {
					defaults = append(defaults, r)
				} else {
					allows = append(allows, r)
					if allowFile == "" {
						allowFile = m.name
					}
				}
			case "deny_reasons":
				reasonRules = append(reasonRules, ruleAt{m.name, r})
			}
		}
	}
	if first == nil {
		return nil // nothing parsed; the parse errors say why
	}
	switch {
	case !first.mod.Package.Path.Equal(authzRef):
		out = append(out, at(first.name, first.mod.Package.Location, Error, RuleNoAllow,
			"no module declares package svc.authz, so no allow rule decides"))
	case len(allows) == 0:
		out = append(out, at(first.name, first.mod.Package.Location, Error, RuleNoAllow,
			"package svc.authz has no allow rule; every request would be denied"))
	}
	if len(allows) > 0 && len(defaults) == 0 {
		out = append(out, at(allowFile, allows[0].Location, Error, RuleNoDefaultAllowFalse,
			"allow has no default; add `default allow := false` so that allow is false, not undefined, when no rule matches"))
	}
	for _, d := range defaults {
		if v, ok := d.Head.Value.Value.(ast.Boolean); !ok || bool(v) {
			out = append(out, at(fileOf(mods, d), d.Location, Error, RuleNoDefaultAllowFalse,
				"default allow is %s; it must be false so that requests no rule allows are denied", d.Head.Value))
		}
	}
	return append(out, checkReasons(reasonRules, types)...)
}

type ruleAt struct {
	file string
	rule *ast.Rule
}

func fileOf(mods []*module, r *ast.Rule) string {
	for _, m := range mods {
		if m.mod == r.Module {
			return m.name
		}
	}
	if r.Location != nil {
		return r.Location.File
	}
	return ""
}

// checkReasons applies deny-reasons-not-string-set. Each rule is first
// checked on its own, for shapes and literals that can never be a set of
// strings; then, when the policy compiled, the type OPA inferred for
// deny_reasons as a whole catches values computed from other rules.
func checkReasons(rules []ruleAt, env *ast.TypeEnv) []Finding {
	var out []Finding
	flagged := false
	for _, ra := range rules {
		r := ra.rule
		if msg := reasonShapeProblem(r); msg != "" {
			out = append(out, at(ra.file, r.Location, Error, RuleDenyReasons, "%s", msg))
			flagged = true
		}
	}
	if flagged || env == nil || len(rules) == 0 {
		return out
	}
	t := env.GetByRef(authzRef.Append(ast.StringTerm("deny_reasons")))
	if ok, known := isStringSet(t); known && !ok {
		r := rules[0]
		out = append(out, at(r.file, r.rule.Location, Error, RuleDenyReasons,
			"deny_reasons has type %s; it must be a set of strings", types.Sprint(t)))
	}
	return out
}

// reasonShapeProblem says what is wrong with one deny_reasons rule, or ""
// when nothing is wrong that can be seen without types.
func reasonShapeProblem(r *ast.Rule) string {
	if len(r.Head.Args) > 0 {
		return "deny_reasons is a function; it must be a set of strings (deny_reasons contains \"…\" if …)"
	}
	if len(r.Head.Ref()) > 1 {
		return "deny_reasons is defined by a partial object or ref head; it must be a set of strings (deny_reasons contains \"…\" if …)"
	}
	switch r.Head.RuleKind() {
	case ast.MultiValue:
		if kind := nonString(r.Head.Key); kind != "" {
			return fmt.Sprintf("deny_reasons contains %s; reasons must be strings", article(kind))
		}
	case ast.SingleValue:
		if r.Head.Key != nil {
			return "deny_reasons is a partial object; it must be a set of strings (deny_reasons contains \"…\" if …)"
		}
		var msg string
		for b := r; b != nil && msg == ""; b = b.Else {
			msg = completeValueProblem(b.Head.Value)
		}
		return msg
	}
	return ""
}

// completeValueProblem checks the value of a complete deny_reasons rule:
// a set literal of strings, a set comprehension or a reference may be
// right; any other literal is wrong.
func completeValueProblem(v *ast.Term) string {
	if v == nil {
		return ""
	}
	switch x := v.Value.(type) {
	case ast.Set:
		var msg string
		x.Foreach(func(t *ast.Term) {
			if kind := nonString(t); kind != "" && msg == "" {
				msg = fmt.Sprintf("deny_reasons holds %s; reasons must be strings", article(kind))
			}
		})
		return msg
	case *ast.SetComprehension:
		if kind := nonString(x.Term); kind != "" {
			return fmt.Sprintf("deny_reasons holds %s; reasons must be strings", article(kind))
		}
		return ""
	case ast.Var, ast.Ref, ast.Call:
		return "" // decided by the type check
	case ast.Boolean:
		if v.Value.Compare(ast.Boolean(true)) == 0 {
			// `deny_reasons if …` is a complete rule of value true.
			return "deny_reasons is a boolean rule; it must be a set of strings (deny_reasons contains \"…\" if …)"
		}
	}
	return fmt.Sprintf("deny_reasons is a complete rule with %s value; it must be a set of strings (deny_reasons contains \"…\" if …)", article(kindName(v.Value)))
}

// nonString names the kind of t when t is a literal that is not a string,
// "" when t is a string or is computed.
func nonString(t *ast.Term) string {
	if t == nil {
		return ""
	}
	switch t.Value.(type) {
	case ast.String, ast.Var, ast.Ref, ast.Call, *ast.TemplateString:
		return ""
	default:
		return kindName(t.Value)
	}
}

// kindName names the kind of a value for messages.
func kindName(v ast.Value) string {
	switch v.(type) {
	case *ast.ArrayComprehension:
		return "array comprehension"
	case *ast.SetComprehension:
		return "set comprehension"
	case *ast.ObjectComprehension:
		return "object comprehension"
	default:
		return ast.ValueName(v)
	}
}

// isStringSet reports whether t is a set whose members are strings; known
// is false when the type says too little to tell (unconstrained any).
func isStringSet(t types.Type) (ok, known bool) {
	switch x := t.(type) {
	case nil:
		return false, false
	case types.Any:
		if len(x) == 0 {
			return false, false
		}
		for _, m := range x {
			if ok, known := isStringSet(m); known && !ok {
				return false, true
			}
		}
		return true, true
	case *types.Set:
		switch of := x.Of().(type) {
		case nil, types.String:
			return true, true
		case types.Any:
			for _, m := range of {
				if _, isStr := m.(types.String); !isStr {
					return false, true
				}
			}
			return true, true // an empty any says nothing against it
		default:
			return false, true
		}
	default:
		return false, true
	}
}

// checkShadowing applies shadows-builtin-root to the declarations OPA's
// compiler does not reject with its own message: `some input`, `some data`
// and the key and value of `some … in`.
func checkShadowing(mods []*module) []Finding {
	var out []Finding
	for _, m := range mods {
		if m.mod == nil {
			continue
		}
		report := func(v ast.Var, loc *ast.Location) {
			out = append(out, at(m.name, loc, Error, RuleShadowsRoot,
				"variable %s hides the %s document; use another name", v, v))
		}
		ast.WalkExprs(m.mod, func(e *ast.Expr) bool {
			decl, ok := e.Terms.(*ast.SomeDecl)
			if !ok {
				return false
			}
			for _, sym := range decl.Symbols {
				var vars []*ast.Term
				switch x := sym.Value.(type) {
				case ast.Var:
					vars = append(vars, sym)
				case ast.Call:
					// some k, v in xs: the call is member(k, v, xs).
					if len(x) > 2 {
						vars = append(vars, x[1:len(x)-1]...)
					}
				}
				for _, t := range vars {
					if v, ok := rootVar(t); ok {
						report(v, t.Location)
					}
				}
			}
			return false
		})
	}
	return out
}

// rootVar reports whether t names input or data (the parser makes either
// a variable or a one-element reference of it).
func rootVar(t *ast.Term) (ast.Var, bool) {
	var v ast.Var
	switch x := t.Value.(type) {
	case ast.Var:
		v = x
	case ast.Ref:
		if len(x) != 1 {
			return "", false
		}
		v, _ = x[0].Value.(ast.Var)
	}
	if v.Equal(ast.InputRootDocument.Value) || v.Equal(ast.DefaultRootDocument.Value) {
		return v, true
	}
	return "", false
}

// article puts "a" or "an" before a kind name.
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}
