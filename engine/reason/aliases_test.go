package reason_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// exported returns the exported top-level names declared by the non-test
// Go files of dir.
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if filepath.Ext(f) != ".go" || len(f) > 8 && f[len(f)-8:] == "_test.go" {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names[n.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return names
}

// TestAliasesComplete: every exported name of the leaf package
// github.com/svc-dev/svc/reason is re-exported here, so that a code added
// there is usable by the engine's importers of this package.
func TestAliasesComplete(t *testing.T) {
	leaf := exported(t, filepath.Join("..", "..", "reason"))
	here := exported(t, ".")
	if len(leaf) < 20 {
		t.Fatalf("found only %d exported names in ../../reason", len(leaf))
	}
	for name := range leaf {
		if !here[name] {
			t.Errorf("reason.%s is not re-exported by engine/reason (aliases.go)", name)
		}
	}
	for name := range here {
		if !leaf[name] {
			t.Errorf("engine/reason.%s is not in the leaf package github.com/svc-dev/svc/reason", name)
		}
	}
}
