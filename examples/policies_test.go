package examples

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/engine/fixture"
	"github.com/svc-dev/svc/engine/lint"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/reqpath"
)

// TestExamplePolicies runs what `core policy lint --strict <dir>` and
// `core policy test <dir>` run on every example policy under policies/:
// each is package svc.authz, lints without an error or a warning, and
// passes all its fixture pairs, which hold allowed and denied inputs,
// every denial with a reason.
func TestExamplePolicies(t *testing.T) {
	entries, err := os.ReadDir("policies")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		dir := filepath.Join("policies", e.Name())
		t.Run(e.Name(), func(t *testing.T) {
			set, err := policy.Load(dir)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			for name, mod := range set.Modules() {
				if got := mod.Package.Path.String(); got != "data.svc.authz" {
					t.Errorf("%s: package %s, want svc.authz", name, got)
				}
			}
			report, err := lint.Dir(dir, lint.Options{Strict: true})
			if err != nil {
				t.Fatalf("lint: %v", err)
			}
			if report.Errors != 0 || report.Warnings != 0 {
				t.Errorf("lint --strict: %d errors, %d warnings: %+v", report.Errors, report.Warnings, report.Files)
			}
			pairs, err := fixture.Discover(filepath.Join(dir, "fixtures"))
			if err != nil {
				t.Fatal(err)
			}
			sum, err := fixture.Run(context.Background(), set, pairs, fixture.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			allowed, denied := 0, 0
			for _, o := range sum.Outcomes {
				if !o.Pass {
					t.Errorf("fixture %s: want allow=%v %q, got allow=%v %q %s", o.Name, o.Expected.Allow, o.Expected.DenyReasons, o.Got.Allow, o.Got.DenyReasons, o.Error)
				}
				if o.Got.Allow != (len(o.Got.DenyReasons) == 0) {
					t.Errorf("fixture %s: allow=%v with deny reasons %q: every denial needs a reason", o.Name, o.Got.Allow, o.Got.DenyReasons)
				}
				if o.Expected.Allow {
					allowed++
				} else {
					denied++
				}
			}
			if allowed < 3 || denied < 5 {
				t.Errorf("%d allowed and %d denied fixtures: want at least 3 and 5", allowed, denied)
			}
		})
	}
	if n < 3 {
		t.Errorf("%d example policies, want at least 3", n)
	}
}

// TestFixtureCanonicalPaths: a fixture's input is the one the sidecar
// would hand the policy, so wherever it has a request path, its
// canonical_path and format are what the engine derives from that path
// (default format suffixes, routes folding case). A near-miss fixture
// ("/API/reports/Export.json") then proves what the policy does with the
// spelling an attacker sends, not with a hand-written canonical path.
func TestFixtureCanonicalPaths(t *testing.T) {
	files, err := filepath.Glob("policies/*/fixtures/*.input.json")
	if err != nil {
		t.Fatal(err)
	}
	defaults, err := filepath.Glob("../policies/fixtures/*.input.json")
	if err != nil {
		t.Fatal(err)
	}
	canon := reqpath.Canon{Formats: reqpath.DefaultFormats}
	checked := 0
	for _, f := range append(files, defaults...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var in struct {
			Request *struct {
				Path          *string `json:"path"`
				CanonicalPath *string `json:"canonical_path"`
				Format        *string `json:"format"`
			} `json:"request"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if in.Request == nil || in.Request.Path == nil {
			continue
		}
		checked++
		want, format, err := canon.Path(*in.Request.Path)
		if err != nil {
			t.Errorf("%s: path %q: %v", f, *in.Request.Path, err)
			continue
		}
		if in.Request.CanonicalPath == nil || *in.Request.CanonicalPath != want || in.Request.Format == nil || *in.Request.Format != format {
			t.Errorf("%s: path %q needs canonical_path %q and format %q", f, *in.Request.Path, want, format)
		}
	}
	if checked < 20 {
		t.Errorf("only %d fixtures with a request path", checked)
	}
}
