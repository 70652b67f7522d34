package layers_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/svc-dev/svc"

// rule is a row of the table: what the packages matching Packages may
// link and who may import them. Patterns are import paths, relative to
// the module for its own packages; "x/..." means x and every package
// below it.
type rule struct {
	Packages []string
	// MayLink, when not nil, is all that the packages may link besides
	// the standard library and themselves; empty means nothing.
	MayLink []string
	// MustNotLink are the packages they may not link, directly or not.
	MustNotLink []string
	// ImportedOnlyBy, when not nil, are the only packages that may
	// import them, besides themselves and their own tests; empty means
	// none.
	ImportedOnlyBy []string
}

// clientMustNotLink is what a program that only calls the sidecar must
// not link: the engine and its policy, JWT and Redis libraries, the
// daemon and its edges.
var clientMustNotLink = []string{"engine/...", "sidecar/...", "envoy/...", "samlgw/...",
	"github.com/open-policy-agent/...", "github.com/lestrrat-go/...", "github.com/redis/..."}

// rules is the table of docs/design.md, in its order.
var rules = []rule{
	{Packages: []string{"reason"}, MayLink: []string{}},
	{Packages: []string{"wire/..."}, MayLink: []string{"wire/...", "internal/jsonstr"}},
	{Packages: []string{"authz", "examples/sidecar-client"}, MustNotLink: clientMustNotLink},
	{Packages: []string{"engine/..."}, MustNotLink: []string{"sidecar/...", "envoy/...", "samlgw/...", "authz/...", "cmd/..."}},
	{Packages: []string{"envoy/...", "samlgw/..."}, MustNotLink: []string{"sidecar/...", "cmd/..."}},
	{Packages: []string{"cmd/core"}, MustNotLink: []string{"sidecar/..."}},
	{Packages: []string{"sdk/rust/capi"}, MustNotLink: []string{"sidecar/...", "envoy/...", "samlgw/...", "cmd/...",
		"github.com/prometheus/...", "go.opentelemetry.io/otel/exporters/prometheus/..."}},
	{Packages: []string{"cmd/internal/..."}, ImportedOnlyBy: []string{"cmd/..."}},
	{Packages: []string{"engine/reason", "engine/idptest", "authz/localapi/..."}, ImportedOnlyBy: []string{}},
}

// pkg is what go list says of one of the module's packages.
type pkg struct {
	deps    []string // linked, directly or not, by the package itself
	imports []string // imported by the package or its tests
}

// listModule runs go list over the whole module.
func listModule(t *testing.T) map[string]pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the dependency rules are read from go list: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-e", "-f",
		`{{.ImportPath}}|{{join .Deps " "}}|{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`,
		module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		path, rest, _ := strings.Cut(sc.Text(), "|")
		deps, imports, _ := strings.Cut(rest, "|")
		pkgs[path] = pkg{deps: strings.Fields(deps), imports: strings.Fields(imports)}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 50 {
		t.Fatalf("go list found only %d packages:\n%s", len(pkgs), out)
	}
	return pkgs
}

// expand makes a pattern of the table a full import path pattern.
func expand(p string) string {
	first, _, _ := strings.Cut(p, "/")
	if strings.Contains(first, ".") {
		return p
	}
	return module + "/" + p
}

// match reports whether path matches the table pattern p.
func match(p, path string) bool {
	p = expand(p)
	if prefix, ok := strings.CutSuffix(p, "/..."); ok {
		return path == prefix || strings.HasPrefix(path, prefix+"/")
	}
	return path == p
}

func matchAny(ps []string, path string) bool {
	return slices.ContainsFunc(ps, func(p string) bool { return match(p, path) })
}

// standard reports whether path is of the standard library, whose first
// element has no dot.
func standard(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// TestRules checks every package of the module against every row.
func TestRules(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	pkgs := listModule(t)
	for _, r := range rules {
		t.Run(strings.Join(r.Packages, ","), func(t *testing.T) {
			matched := 0
			for path, p := range pkgs {
				if !matchAny(r.Packages, path) {
					continue
				}
				matched++
				for _, d := range p.deps {
					if r.MayLink != nil && !standard(d) && !matchAny(r.MayLink, d) && !matchAny(r.Packages, d) {
						t.Errorf("%s links %s, outside the standard library and %v", path, d, r.MayLink)
					}
					if matchAny(r.MustNotLink, d) {
						t.Errorf("%s links %s", path, d)
					}
				}
			}
			if matched == 0 {
				t.Fatalf("no package of the module matches %v", r.Packages)
			}
			if r.ImportedOnlyBy == nil {
				return
			}
			for path, p := range pkgs {
				if matchAny(r.Packages, path) || matchAny(r.ImportedOnlyBy, path) {
					continue
				}
				for _, imp := range p.imports {
					if !matchAny(r.Packages, imp) {
						continue
					}
					if len(r.ImportedOnlyBy) == 0 {
						t.Errorf("%s imports %s, which nothing else may import", path, imp)
					} else {
						t.Errorf("%s imports %s, which only %v may import", path, imp, r.ImportedOnlyBy)
					}
				}
			}
		})
	}
}

// TestRulesMatchDesignPage: the table of docs/design.md is rules.
func TestRulesMatchDesignPage(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseTable(string(page), "## Package dependencies")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rules, got, cmp.AllowUnexported(rule{})); diff != "" {
		t.Errorf("docs/design.md's table differs from rules (-test +page):\n%s", diff)
	}
}

// parseTable reads the first Markdown table after heading in page. Its
// columns are those of rule; a cell lists `patterns` separated by
// commas, "—" for no rule and "nothing" for an empty list.
func parseTable(page, heading string) ([]rule, error) {
	_, after, ok := strings.Cut(page, "\n"+heading+"\n")
	if !ok {
		return nil, fmt.Errorf("docs/design.md has no heading %q", heading)
	}
	var out []rule
	rows := 0
	for line := range strings.Lines(after) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if rows > 0 {
				break
			}
			continue
		}
		rows++
		if rows <= 2 { // header and separator
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			return nil, fmt.Errorf("row %q has %d cells, want 4", line, len(cells))
		}
		var lists [4][]string
		for i, c := range cells {
			l, err := parseCell(strings.TrimSpace(c))
			if err != nil {
				return nil, fmt.Errorf("row %q: %w", line, err)
			}
			lists[i] = l
		}
		out = append(out, rule{Packages: lists[0], MayLink: lists[1], MustNotLink: lists[2], ImportedOnlyBy: lists[3]})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no table under %q", heading)
	}
	return out, nil
}

func parseCell(c string) ([]string, error) {
	switch c {
	case "—":
		return nil, nil
	case "nothing":
		return []string{}, nil
	}
	var out []string
	for item := range strings.SplitSeq(c, ",") {
		item = strings.TrimSpace(item)
		p, ok := strings.CutPrefix(item, "`")
		if p, ok2 := strings.CutSuffix(p, "`"); ok && ok2 && p != "" {
			out = append(out, p)
			continue
		}
		return nil, fmt.Errorf("cell item %q is not a `pattern`", item)
	}
	return out, nil
}

// deprecatedAliases are public packages kept one release as aliases of
// what moved (see rules: nothing may import them).
var deprecatedAliases = []string{"engine/idptest"}

// TestTestHelpersAreInternal: the helpers of the tests (packages named
// like httptest, and the end-to-end harness) are not public API: they
// live below an internal/ folder, so no program outside the module can
// import them and come to rely on them.
func TestTestHelpersAreInternal(t *testing.T) {
	out, err := exec.Command("go", "list", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	helpers := 0
	for _, path := range strings.Fields(string(out)) {
		name := path[strings.LastIndex(path, "/")+1:]
		if !strings.HasSuffix(name, "test") && name != "harness" {
			continue
		}
		helpers++
		if !strings.Contains(path, "/internal/") && !matchAny(deprecatedAliases, path) {
			t.Errorf("%s is a test helper outside an internal/ folder: move it below internal/ (internal/testkit/ holds the kit)", path)
		}
	}
	if helpers < 5 {
		t.Fatalf("found only %d test helper packages", helpers)
	}
}
