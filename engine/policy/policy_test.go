package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/policytest"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// golden compares got with testdata/golden/<name>, rewriting the file
// instead when -update is set.
func golden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, *update, filepath.Join("testdata", "golden", name), []byte(got))
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		dir  string
		// first is the first problem expected, Msg and Details left out.
		first policy.Problem
	}{
		{
			name:  "type error carries file, line and column",
			dir:   "type-error",
			first: policy.Problem{File: "testdata/load/type-error/authz.rego", Row: 7, Col: 11, Code: "rego_type_error"},
		},
		{
			name:  "syntax errors of every file are listed",
			dir:   "syntax-error",
			first: policy.Problem{File: "testdata/load/syntax-error/authz.rego", Row: 7, Code: "rego_parse_error"},
		},
		{
			name:  "package svc.authz is required",
			dir:   "no-package",
			first: policy.Problem{Code: policy.CodePackageMissing},
		},
		{
			name:  "two data files setting one path",
			dir:   "data-conflict",
			first: policy.Problem{File: "testdata/load/data-conflict/data.json", Code: policy.CodeData},
		},
		{
			name:  "rule and data at one path",
			dir:   "rule-data-conflict",
			first: policy.Problem{File: "testdata/load/rule-data-conflict/authz.rego", Row: 3, Col: 1, Code: "rego_compile_error"},
		},
		{
			name:  "missing directory",
			dir:   "does-not-exist",
			first: policy.Problem{File: "testdata/load/does-not-exist", Code: policy.CodeLoad},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := policy.Load("testdata/load/" + tt.dir)
			if err == nil {
				t.Fatalf("Load succeeded with files %v", set.Files())
			}
			var perr *policy.Error
			if !errors.As(err, &perr) {
				t.Fatalf("error %T is not *policy.Error: %v", err, err)
			}
			got := perr.Problems[0]
			got.Msg, got.Details = "", nil
			if diff := cmp.Diff(tt.first, got); diff != "" {
				t.Errorf("first problem (-want +got):\n%s", diff)
			}
			golden(t, "load-"+tt.dir+".txt", err.Error()+"\n")
		})
	}
}

func TestLoadEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("no policies here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := policy.Load(dir)
	if err == nil || !strings.Contains(err.Error(), "no policy files (*.rego) found") {
		t.Fatalf("Load(empty dir) = %v, want a no-policy-files error", err)
	}
	if !strings.HasPrefix(err.Error(), filepath.ToSlash(dir)+": ") {
		t.Errorf("error %q does not name the directory", err)
	}
}

func TestLoadDataMerge(t *testing.T) {
	set, err := policy.Load("testdata/load/data-merge")
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{
		"testdata/load/data-merge/authz.rego",
		"testdata/load/data-merge/data.json",
		"testdata/load/data-merge/roles/admin/data.yml",
		"testdata/load/data-merge/roles/data.yaml",
	}
	if diff := cmp.Diff(wantFiles, set.Files()); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	wantData := map[string]any{
		"tenants": []any{"acme", "globex"},
		"roles": map[string]any{
			"grants": map[string]any{"editor": []any{"orders:read", "orders:update"}},
			"admin":  map[string]any{"enabled": true},
		},
	}
	if diff := cmp.Diff(wantData, set.Data()); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	tests := []struct {
		name    string
		role    string
		tenant  string
		allowed bool
	}{
		{"granted by yaml data, tenant from json data", "editor", "globex", true},
		{"role not in data", "viewer", "acme", false},
		{"tenant not in data", "editor", "initech", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := set.EvalValue(context.Background(), map[string]any{
				"action": "orders:update",
				"user":   map[string]any{"role": tt.role},
				"tenant": map[string]any{"id": tt.tenant},
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allow != tt.allowed {
				t.Errorf("allow = %v, want %v (reasons %q)", res.Allow, tt.allowed, res.DenyReasons)
			}
		})
	}
}

func TestLoadFSAndFromModules(t *testing.T) {
	const src = "package svc.authz\n\nallow if data.limits.orders.max > 5\n"
	fsys := fstest.MapFS{
		"policy/authz.rego":              {Data: []byte(src)},
		"policy/limits/orders/data.json": {Data: []byte(`{"max": 10}`)},
		"policy/limits/notes.txt":        {Data: []byte("ignored")},
		"elsewhere/authz.rego":           {Data: []byte("package svc.authz\n\nallow := false\n")},
	}
	fromFS, err := policy.LoadFS(fsys, "policy")
	if err != nil {
		t.Fatal(err)
	}
	fromModules, err := policy.FromModules(map[string]string{"authz.rego": src},
		map[string]any{"limits": map[string]any{"orders": map[string]any{"max": 10}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"policy/authz.rego", "policy/limits/orders/data.json"}, fromFS.Files()); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	for name, set := range map[string]*policy.Set{"LoadFS": fromFS, "FromModules": fromModules} {
		t.Run(name, func(t *testing.T) {
			res, err := set.EvalValue(context.Background(), map[string]any{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Allow || len(res.DenyReasons) != 0 || res.DenyReasons == nil {
				t.Errorf("result = %+v, want allowed with empty, non-nil reasons", res)
			}
			if len(set.Modules()) != 1 || set.Compiler() == nil {
				t.Errorf("modules %d, compiler %v", len(set.Modules()), set.Compiler())
			}
		})
	}
}

func TestLoadSingleFile(t *testing.T) {
	set, err := policy.Load("testdata/load/undefined-rules/authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"testdata/load/undefined-rules/authz.rego"}, set.Files()); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func TestEvalOutcomes(t *testing.T) {
	tests := []struct {
		name        string
		dir         string
		input       map[string]any
		wantAllow   bool
		wantReasons []string
		// wantErr is a substring of the error; its code is always
		// reason.PolicyError.
		wantErr string
	}{
		{
			name:        "undefined allow is false, undefined reasons empty",
			dir:         "undefined-rules",
			wantReasons: []string{},
		},
		{
			name:    "non-boolean allow",
			dir:     "non-boolean-allow",
			wantErr: "svc.authz.allow must be a boolean, got string",
		},
		{
			name:    "deny_reasons holding a number",
			dir:     "reasons-not-strings",
			wantErr: "svc.authz.deny_reasons must hold only strings, got a number",
		},
		{
			name:    "deny_reasons as an object",
			dir:     "reasons-object",
			wantErr: "svc.authz.deny_reasons must be a set of strings, got object",
		},
		{
			name:    "conflicting values of allow",
			dir:     "allow-conflict",
			input:   map[string]any{"a": true, "b": true},
			wantErr: "eval_conflict_error: rule data.svc.authz.allow produced conflicting values",
		},
		{
			name:        "one body of a conflicting rule",
			dir:         "allow-conflict",
			input:       map[string]any{"a": true},
			wantAllow:   true,
			wantReasons: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := policy.Load("testdata/load/" + tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			res, err := set.EvalValue(context.Background(), tt.input)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if code := reason.Of(err, ""); code != reason.PolicyError {
					t.Errorf("code = %q, want %q", code, reason.PolicyError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Allow != tt.wantAllow {
				t.Errorf("allow = %v, want %v", res.Allow, tt.wantAllow)
			}
			if diff := cmp.Diff(tt.wantReasons, res.DenyReasons); diff != "" {
				t.Errorf("deny reasons (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEvalCanceledContext(t *testing.T) {
	set := policytest.Default(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := set.Eval(ctx, benchInput())
	if code := reason.Of(err, ""); code != reason.PolicyError || !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v (code %q), want policy-error wrapping context.Canceled", err, code)
	}
}

func TestEvalInvalidInput(t *testing.T) {
	set := policytest.Default(t)
	tests := []struct {
		name  string
		input any
	}{
		{"value with no JSON form", map[string]any{"bad": make(chan int)}},
		{"malformed JSON text", json.RawMessage(`{"action":`)},
		{"claims with no JSON form", policy.Input{User: policy.User{Claims: map[string]any{"f": func() {}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := set.EvalValue(context.Background(), tt.input)
			if code := reason.Of(err, ""); code != reason.InputInvalid {
				t.Fatalf("error = %v (code %q), want %q", err, code, reason.InputInvalid)
			}
		})
	}
}

func TestRevisionAndDecisionID(t *testing.T) {
	base := policytest.Default(t)
	set := base.WithRevision("rev-42")
	if !regexp.MustCompile(`^sha256:[0-9a-f]{16}$`).MatchString(base.Revision()) || set.Revision() != "rev-42" {
		t.Fatalf("revisions: base %q (want a content digest), copy %q", base.Revision(), set.Revision())
	}
	other, err := policy.FromModules(map[string]string{"a.rego": "package svc.authz\n\nallow := true\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	same, err := policy.FromModules(map[string]string{"a.rego": "package svc.authz\n\nallow := true\n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.Revision() == base.Revision() || other.Revision() != same.Revision() {
		t.Fatalf("content digest must follow the sources: default %q, other %q, same again %q", base.Revision(), other.Revision(), same.Revision())
	}
	seen := map[string]bool{}
	for range 200 {
		res, err := set.Eval(context.Background(), benchInput())
		if err != nil {
			t.Fatal(err)
		}
		if res.Revision != "rev-42" {
			t.Fatalf("result revision %q", res.Revision)
		}
		id := res.DecisionID
		if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[14] != '4' || id[18] != '-' || id[23] != '-' || !strings.ContainsRune("89ab", rune(id[19])) {
			t.Fatalf("decision id %q is not a version 4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("decision id %q repeated", id)
		}
		seen[id] = true
	}
}

func TestFromModulesErrors(t *testing.T) {
	tests := []struct {
		name     string
		modules  map[string]string
		data     map[string]any
		wantCode string
		wantMsg  string
	}{
		{
			name:     "no modules",
			wantCode: policy.CodeLoad,
			wantMsg:  "no policy modules",
		},
		{
			name:     "data that is not JSON",
			modules:  map[string]string{"a.rego": "package svc.authz\n\nallow := true\n"},
			data:     map[string]any{"bad": make(chan int)},
			wantCode: policy.CodeData,
			wantMsg:  "data is not a JSON document",
		},
		{
			name:     "allow declared as a function",
			modules:  map[string]string{"a.rego": "package svc.authz\n\nallow(x) if x == 1\n"},
			wantCode: "rego_type_error",
		},
		{
			name:     "helper package only",
			modules:  map[string]string{"h.rego": "package svc.authz.helpers\n\nok := true\n"},
			wantCode: policy.CodePackageMissing,
			wantMsg:  "no policy defines package svc.authz",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := policy.FromModules(tt.modules, tt.data)
			var perr *policy.Error
			if !errors.As(err, &perr) {
				t.Fatalf("error = %v, want *policy.Error", err)
			}
			if p := perr.Problems[0]; p.Code != tt.wantCode || !strings.Contains(p.Msg, tt.wantMsg) {
				t.Errorf("problem = %+v, want code %q and a message containing %q", p, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestHelperPackages(t *testing.T) {
	set, err := policy.FromModules(map[string]string{
		"authz.rego":   "package svc.authz\n\nimport data.svc.lib\n\ndefault allow := false\n\nallow if lib.is_admin\n",
		"lib/lib.rego": "package svc.lib\n\nis_admin if input.user.role == \"admin\"\n",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for role, want := range map[string]bool{"admin": true, "viewer": false} {
		res, err := set.EvalValue(context.Background(), map[string]any{"user": map[string]any{"role": role}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Allow != want {
			t.Errorf("role %s: allow = %v, want %v", role, res.Allow, want)
		}
	}
}
