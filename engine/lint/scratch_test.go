package lint

import (
	"fmt"
	"os"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

func compileSrc(name, src string, strict bool) *ast.Compiler {
	m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
	if err != nil {
		fmt.Println("PARSE", err)
		return nil
	}
	c := ast.NewCompiler().WithStrict(strict).WithDefaultRegoVersion(ast.RegoV1)
	c.Compile(map[string]*ast.Module{name: m})
	for _, e := range c.Errors {
		fmt.Printf("  %s %s:%d:%d %q\n", e.Code, e.Location.File, e.Location.Row, e.Location.Col, e.Message)
	}
	return c
}

func TestScratch(t *testing.T) {
	src, _ := os.ReadFile("../../policies/authz.rego")
	c := compileSrc("authz.rego", string(src), true)
	fmt.Println("default type:", c.TypeEnv.Get(ast.MustParseRef("data.svc.authz.deny_reasons")))
	for i, s := range []string{
		"package svc.authz\nf(input) := 1\n",
		"package svc.authz\nallow if { input := 1; input == 1 }\n",
		"package svc.authz\nallow if { some data; data == 1 }\n",
		"package svc.authz\ninput := 1\n",
		"package svc.authz\nallow if { some x }\n",
		"package svc.authz\nallow if { some x in [1]; true }\n",
		"package svc.authz\ndeny_reasons contains 1 if true\n",
		"package svc.authz\ndeny_reasons contains x if { x := input.a }\n",
		"package svc.authz\ndeny_reasons contains x if { x := sprintf(\"%d\", [1]) }\n",
		"package svc.authz\ndeny_reasons := [\"a\"]\n",
		"package svc.authz\ndeny_reasons := {\"a\": 1}\n",
		"package svc.authz\ndeny_reasons[\"a\"] := 1\n",
		"package svc.authz\ndeny_reasons := set()\n",
		"package svc.authz\ndeny_reasons := {x | x := input.a[_]}\n",
		"package svc.authz\ndeny_reasons contains 1 if true\ndeny_reasons contains \"a\" if true\n",
		"package svc.authz\nallow if every input in [1] { input == 1 }\n",
		"package svc.authz\nallow if { x := 1 }\n",
	} {
		fmt.Println(i, s)
		c := compileSrc("t.rego", s, true)
		if c != nil && c.TypeEnv != nil {
			fmt.Println("  type:", c.TypeEnv.Get(ast.MustParseRef("data.svc.authz.deny_reasons")))
		}
	}
}
