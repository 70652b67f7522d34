package policies_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/policies"
)

// expectation is the content of a <name>.expect.json fixture file.
type expectation struct {
	Allow       *bool    `json:"allow"`
	DenyReasons []string `json:"deny_reasons"`
}

// fixture is one input/expect pair.
type fixture struct {
	name   string
	input  any
	expect expectation
}

// readFixtures reads every pair in dir; a file without its partner is an
// error, as is any other file.
func readFixtures(dir string) ([]fixture, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	inputs, expects := map[string]bool{}, map[string]bool{}
	for _, e := range entries {
		switch n := e.Name(); {
		case strings.HasSuffix(n, ".input.json"):
			inputs[strings.TrimSuffix(n, ".input.json")] = true
		case strings.HasSuffix(n, ".expect.json"):
			expects[strings.TrimSuffix(n, ".expect.json")] = true
		case strings.HasSuffix(n, ".plan.json"):
			// A plan fixture: examples' TestPlansAgreeWithDecisions and
			// core policy test run it.
		default:
			return nil, fmt.Errorf("%s: not a fixture file", n)
		}
	}
	var out []fixture
	for name := range inputs {
		if !expects[name] {
			return nil, fmt.Errorf("%s.input.json has no %s.expect.json", name, name)
		}
	}
	for name := range expects {
		if !inputs[name] {
			return nil, fmt.Errorf("%s.expect.json has no %s.input.json", name, name)
		}
		f := fixture{name: name}
		if err := decodeFile(filepath.Join(dir, name+".input.json"), &f.input, false); err != nil {
			return nil, err
		}
		if err := decodeFile(filepath.Join(dir, name+".expect.json"), &f.expect, true); err != nil {
			return nil, err
		}
		if f.expect.Allow == nil || f.expect.DenyReasons == nil {
			return nil, fmt.Errorf("%s.expect.json: both allow and deny_reasons are required", name)
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b fixture) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

func decodeFile(path string, v any, strict bool) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func TestFixtures(t *testing.T) {
	fixtures, err := readFixtures("fixtures")
	if err != nil {
		t.Fatal(err)
	}
	if len(fixtures) < 14 {
		t.Fatalf("only %d fixture pairs", len(fixtures))
	}
	fromDir, err := policy.Load(".")
	if err != nil {
		t.Fatalf("load policies: %v", err)
	}
	embedded, err := policy.LoadFS(policies.Default, ".")
	if err != nil {
		t.Fatalf("load embedded policies: %v", err)
	}
	sets := map[string]*policy.Set{"dir": fromDir, "embedded": embedded}
	for _, f := range fixtures {
		for setName, set := range sets {
			t.Run(setName+"/"+f.name, func(t *testing.T) {
				got, err := set.EvalValue(context.Background(), f.input)
				if err != nil {
					t.Fatalf("eval: %v", err)
				}
				want := expectation{Allow: f.expect.Allow, DenyReasons: f.expect.DenyReasons}
				have := expectation{Allow: &got.Allow, DenyReasons: got.DenyReasons}
				if diff := cmp.Diff(want, have); diff != "" {
					t.Errorf("decision mismatch (-want +got):\n%s", diff)
				}
				if got.Allow != (len(got.DenyReasons) == 0) {
					t.Errorf("allow=%v with deny reasons %q: every denial needs a reason", got.Allow, got.DenyReasons)
				}
			})
		}
	}
}

func TestFixturesCoverEveryReason(t *testing.T) {
	fixtures, err := readFixtures("fixtures")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	allowed := 0
	for _, f := range fixtures {
		if *f.expect.Allow {
			allowed++
		}
		for _, r := range f.expect.DenyReasons {
			kind, _, _ := strings.Cut(r, ":")
			seen[kind] = true
		}
	}
	for _, kind := range []string{"action-malformed", "no-role", "tenant-missing", "tenant-mismatch", "role-forbidden", "plan-required"} {
		if !seen[kind] {
			t.Errorf("no fixture expects deny reason %q", kind)
		}
	}
	if allowed == 0 {
		t.Error("no fixture expects allow")
	}
}

func TestDefaultEmbedsPolicy(t *testing.T) {
	set, err := policy.LoadFS(policies.Default, ".")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"authz.rego"}, set.Files()); diff != "" {
		t.Errorf("embedded files (-want +got):\n%s", diff)
	}
}

// TestAllowUsesActionPattern guards the one duplication the hot path
// allows itself: allow writes out the action pattern instead of reading
// action_pattern, and the two must stay the same.
func TestAllowUsesActionPattern(t *testing.T) {
	set, err := policy.LoadFS(policies.Default, ".")
	if err != nil {
		t.Fatal(err)
	}
	var pattern ast.Value
	var inAllow []ast.Value
	for _, rule := range set.Modules()["authz.rego"].Rules {
		switch rule.Head.Name {
		case "action_pattern":
			pattern = rule.Head.Value.Value
		case "allow":
			ast.WalkExprs(rule.Body, func(e *ast.Expr) bool {
				if e.IsCall() && e.Operator().String() == "regex.match" {
					inAllow = append(inAllow, e.Operand(0).Value)
				}
				return false
			})
		}
	}
	if pattern == nil || len(inAllow) != 1 {
		t.Fatalf("action_pattern %v, regex.match calls in allow %v", pattern, inAllow)
	}
	if pattern.Compare(inAllow[0]) != 0 {
		t.Errorf("allow matches %v, action_pattern is %v", inAllow[0], pattern)
	}
}
