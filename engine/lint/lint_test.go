package lint_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/engine/lint"
)

// want is a finding as the tests spell it: "line:col severity rule".
type want string

func TestRules(t *testing.T) {
	tests := []struct {
		dir  string
		file string // file of the findings, relative to the case dir
		want []want
	}{
		{"ok", "", nil},
		{"parse-error", "authz.rego", []want{"8:14 error parse-error"}},
		// The helper parses, but allow is in the module that does not:
		// no-allow-rule must not fire.
		{"parse-error-with-helper", "authz.rego", []want{"8:14 error parse-error"}},
		{"compile-error", "authz.rego", []want{"7:2 error compile-error"}},
		{"type-error", "authz.rego", []want{"5:10 error type-error"}},
		{"unsafe-var", "authz.rego", []want{"5:10 error unsafe-var"}},
		{"recursion", "authz.rego", []want{"5:1 error recursion", "7:1 error recursion"}},
		{"unused-variable", "authz.rego", []want{"6:2 warning unused-variable"}},
		{"unused-import", "authz.rego", []want{"3:1 warning unused-import"}},
		{"shadows-builtin-root", "authz.rego", []want{"9:1 error shadows-builtin-root"}},
		{"shadows-some-input", "authz.rego", []want{"6:7 error shadows-builtin-root"}},
		{"package-not-svc-authz", "helpers.rego", []want{"1:1 error package-not-svc-authz"}},
		{"helper-outside-svc", "lib/strings.rego", []want{"1:1 error package-not-svc-authz"}},
		{"no-allow-rule", "authz.rego", []want{"1:1 error no-allow-rule"}},
		{"no-default-allow-false", "authz.rego", []want{"3:1 error no-default-allow-false"}},
		{"default-allow-true", "authz.rego", []want{"3:1 error no-default-allow-false"}},
		{"deny-reasons-number", "authz.rego", []want{"7:1 error deny-reasons-not-string-set"}},
		{"deny-reasons-array", "authz.rego", []want{"7:1 error deny-reasons-not-string-set"}},
		{"deny-reasons-computed", "authz.rego", []want{"7:1 error deny-reasons-not-string-set"}},
		{"deny-reasons-complete-set", "", nil},
		{"unknown-input-field", "authz.rego", []want{"5:10 warning unknown-input-field"}},
		{"unknown-input-alias", "authz.rego", []want{"10:2 warning unknown-input-field"}},
		{"data-error", "data.json", []want{"1:26 error data-error"}},
		// Two allow rules beside six the index selects, and a set of
		// eight none of which it can use.
		{"rule-not-indexed", "authz.rego", []want{
			"28:1 warning rule-not-indexed", "34:1 warning rule-not-indexed",
			"41:1 warning rule-not-indexed", "43:1 warning rule-not-indexed", "45:1 warning rule-not-indexed",
			"47:1 warning rule-not-indexed", "49:1 warning rule-not-indexed", "51:1 warning rule-not-indexed",
			"53:1 warning rule-not-indexed", "55:1 warning rule-not-indexed",
		}},
		// Three unindexed rules: too few for the index to matter.
		{"rule-not-indexed-small", "", nil},
		{"raw-path-comparison", "authz.rego", []want{
			"8:2 warning raw-path-comparison", "9:13 warning raw-path-comparison", "10:31 warning raw-path-comparison",
			"13:2 warning raw-path-comparison", "14:16 warning raw-path-comparison", "16:2 warning raw-path-comparison",
			"26:2 warning raw-path-comparison", "27:11 warning raw-path-comparison", "28:2 warning raw-path-comparison",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			r, err := lint.Dir("testdata/"+tt.dir, lint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []want
			errs, warns := 0, 0
			for _, f := range r.Files {
				for _, x := range f.Findings {
					if f.File != "testdata/"+tt.dir+"/"+tt.file {
						t.Errorf("finding in %s, want it in %s: %+v", f.File, tt.file, x)
					}
					got = append(got, want(strings.Join([]string{pos(x), string(x.Severity), x.Rule}, " ")))
					if x.Message == "" {
						t.Errorf("finding without a message: %+v", x)
					}
					if x.Severity == lint.Error {
						errs++
					} else {
						warns++
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if r.Errors != errs || r.Warnings != warns {
				t.Errorf("counts = %d errors, %d warnings; findings hold %d, %d", r.Errors, r.Warnings, errs, warns)
			}
		})
	}
}

func pos(f lint.Finding) string { return fmt.Sprintf("%d:%d", f.Line, f.Col) }

func TestFilesAndMessages(t *testing.T) {
	r, err := lint.Dir("testdata/ok", lint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range r.Files {
		files = append(files, f.File)
	}
	// Test files and hidden directories are skipped, as the loader
	// skips them; data files without findings are not listed.
	if diff := cmp.Diff([]string{"testdata/ok/authz.rego", "testdata/ok/svc/lib/strings.rego"}, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}

	msgs := map[string]string{
		"unknown-input-field":    "input.user.name is not a field of the policy input (input.user has claims, email, id, role, roles, tenant_id)",
		"unknown-input-alias":    "input.request.body is not a field of the policy input (input.request has canonical_path, format, headers, host, method, path, query, source_ip)",
		"deny-reasons-computed":  "deny_reasons has type set[number]; it must be a set of strings",
		"deny-reasons-array":     `deny_reasons is a complete rule with an array value; it must be a set of strings (deny_reasons contains "…" if …)`,
		"deny-reasons-number":    "deny_reasons contains a number; reasons must be strings",
		"default-allow-true":     "default allow is true; it must be false so that requests no rule allows are denied",
		"helper-outside-svc":     "helper package lib.strings is outside svc; use a package under svc (such as svc.lib.strings) so that bundles, rooted at svc, can hold it",
		"shadows-some-input":     "variable input hides the input document; use another name",
		"no-default-allow-false": "allow has no default; add `default allow := false` so that allow is false, not undefined, when no rule matches",
	}
	for dir, want := range msgs {
		t.Run(dir, func(t *testing.T) {
			r, err := lint.Dir("testdata/"+dir, lint.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range r.Files {
				for _, x := range f.Findings {
					if x.Message != want {
						t.Errorf("message = %q\nwant      %q", x.Message, want)
					}
				}
			}
		})
	}
}

// TestRuleNotIndexedMessage: the message names the rule set, its size
// and how many of its rules the index cannot rule out.
func TestRuleNotIndexedMessage(t *testing.T) {
	r, err := lint.Dir("testdata/rule-not-indexed", lint.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{
		28: "OPA's rule index cannot rule this rule out: none of its conditions tests an input or data field against a constant in a way the index uses (==, in, startswith, endswith, glob.match), so it is evaluated for every query of svc.authz.allow (8 rules, 2 of them like this one)",
		55: "OPA's rule index cannot rule this rule out: none of its conditions tests an input or data field against a constant in a way the index uses (==, in, startswith, endswith, glob.match), so it is evaluated for every query of svc.authz.explained (8 rules, 8 of them like this one)",
	}
	for _, f := range r.Files {
		for _, x := range f.Findings {
			if w, ok := want[x.Line]; ok && x.Message != w {
				t.Errorf("line %d: message = %q\nwant %q", x.Line, x.Message, w)
			}
		}
	}
}

func TestStrict(t *testing.T) {
	for _, tt := range []struct {
		strict         bool
		errors, warned int
		severity       lint.Severity
	}{
		{false, 0, 1, lint.Warning},
		{true, 1, 0, lint.Error},
	} {
		t.Run(fmt.Sprintf("strict=%v", tt.strict), func(t *testing.T) {
			r, err := lint.Dir("testdata/unused-import", lint.Options{Strict: tt.strict})
			if err != nil {
				t.Fatal(err)
			}
			if r.Errors != tt.errors || r.Warnings != tt.warned {
				t.Errorf("counts = %d/%d, want %d/%d", r.Errors, r.Warnings, tt.errors, tt.warned)
			}
			if got := r.Files[0].Findings[0].Severity; got != tt.severity {
				t.Errorf("severity = %s, want %s", got, tt.severity)
			}
		})
	}
}

func TestDefaultPolicyIsClean(t *testing.T) {
	r, err := lint.Dir("../../policies", lint.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors+r.Warnings != 0 {
		t.Errorf("the default policy has findings: %+v", r.Files)
	}
}

func TestDirErrors(t *testing.T) {
	for _, tt := range []struct{ name, dir, want string }{
		{"missing", "testdata/does-not-exist", "no such file or directory"},
		{"file", "testdata/ok/authz.rego", "not a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lint.Dir(tt.dir, lint.Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	empty := t.TempDir()
	if _, err := lint.Dir(empty, lint.Options{}); err == nil || !strings.Contains(err.Error(), "no policy files") {
		t.Errorf("empty directory: error = %v", err)
	}
}

func TestRulesCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range lint.Rules() {
		if seen[r.ID] || r.Summary == "" || (r.Severity != lint.Error && r.Severity != lint.Warning) {
			t.Errorf("bad catalogue entry %+v", r)
		}
		seen[r.ID] = true
	}
}
