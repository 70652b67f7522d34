package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/policytest"
	"github.com/svc-dev/svc/reason"
)

// viaJSON returns what a caller sending the input as JSON would pass.
func viaJSON(t *testing.T, in policy.Input) any {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestInputValueMatchesJSON checks that the hand-built AST of an Input is
// the document its JSON encoding gives, and that Eval and EvalValue decide
// alike on both.
func TestInputValueMatchesJSON(t *testing.T) {
	full := benchInput()
	full.Request = &policy.Request{
		Method:  "POST",
		Path:    "/api/orders",
		Host:    "shop.acme.example",
		Query:   map[string]string{"dry_run": "1"},
		Headers: map[string]string{"content-type": "application/json", "x-request-id": "r-1"},
	}
	full.User.Claims = map[string]any{
		"department": "sales",
		"level":      3,
		"ratio":      0.5,
		"groups":     []any{"a", "b"},
		"nested":     map[string]any{"ok": true, "none": nil},
	}
	full.Identity = &policy.Identity{Kind: "session", ID: full.User.ID, TenantID: full.User.TenantID,
		Roles: full.User.Roles, Issuer: "https://sso.acme.example", Method: "saml", Claims: full.User.Claims}
	ownClaims := full
	ownClaims.Identity = &policy.Identity{Kind: "api_key", ID: "svc-ci", Claims: map[string]any{"api_key_id": "k1"}}
	crossTenant := benchInput()
	crossTenant.Resource.Tenant = "globex"
	noRole := benchInput()
	noRole.User.Role, noRole.User.Roles = "", nil
	attrs := benchInput()
	attrs.Resource.Attributes = map[string]any{
		"owner": "u-1", "status": "archived", "size": json.Number("12"), "tags": []any{"a", nil},
		"meta": map[string]any{"zone": "eu", "flags": map[string]any{"hot": true}},
	}
	emptyAttrs := benchInput()
	emptyAttrs.Resource.Attributes = map[string]any{}
	bare := policy.Input{}
	emptyRequest := benchInput()
	emptyRequest.Request = &policy.Request{}
	badUTF8 := benchInput()
	badUTF8.Action = "orders:\xff\xferead"
	badUTF8.User.Role, badUTF8.User.Roles = "edit\xf3or", []string{"\xc3"}
	badUTF8.Request = &policy.Request{Method: "GET", Headers: map[string]string{"x-\xff": "\xfe"}}
	tests := []struct {
		name string
		in   policy.Input
	}{
		{"allowed editor", benchInput()},
		{"every field set", full},
		{"identity with claims of its own", ownClaims},
		{"cross tenant", crossTenant},
		{"resource attributes", attrs},
		{"empty resource attributes", emptyAttrs},
		{"no role, nil roles", noRole},
		{"zero input", bare},
		{"empty request", emptyRequest},
		{"invalid UTF-8", badUTF8},
	}
	set := policytest.Default(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := viaJSON(t, tt.in)
			typed, err := tt.in.Value()
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := ast.InterfaceToValue(raw)
			if err != nil {
				t.Fatal(err)
			}
			if typed.Compare(fromJSON) != 0 {
				t.Fatalf("typed input converts to\n%v\nJSON input to\n%v", typed, fromJSON)
			}
			a, err := set.Eval(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := set.EvalValue(context.Background(), raw)
			if err != nil {
				t.Fatal(err)
			}
			c, err := set.EvalValue(context.Background(), &tt.in)
			if err != nil {
				t.Fatal(err)
			}
			rawJSON, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			d, err := set.EvalValue(context.Background(), json.RawMessage(rawJSON))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []*policy.Result{&a, &b, &c, &d} {
				r.DecisionID = ""
			}
			if diff := cmp.Diff(a, d); diff != "" {
				t.Errorf("Eval vs EvalValue(json.RawMessage) (-typed +raw):\n%s", diff)
			}
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("Eval vs EvalValue(map) (-typed +map):\n%s", diff)
			}
			if diff := cmp.Diff(a, c); diff != "" {
				t.Errorf("Eval vs EvalValue(*Input) (-typed +pointer):\n%s", diff)
			}
		})
	}
}

func TestInvalidNumbersAreInputErrors(t *testing.T) {
	set := policytest.Default(t)
	for _, n := range []json.Number{"", "x", "1..2", "true"} {
		t.Run(string(n), func(t *testing.T) {
			in := benchInput()
			in.User.Claims = map[string]any{"level": n}
			if _, err := set.Eval(context.Background(), in); reason.Of(err, "") != reason.InputInvalid {
				t.Fatalf("typed input: err = %v, want input-invalid", err)
			}
			if _, err := set.Decide(context.Background(), in); reason.Of(err, "") != reason.InputInvalid {
				t.Fatalf("Decide: err = %v, want input-invalid", err)
			}
			in = benchInput()
			in.Resource.Attributes = map[string]any{"size": n}
			if _, err := set.Eval(context.Background(), in); reason.Of(err, "") != reason.InputInvalid {
				t.Fatalf("resource attributes: err = %v, want input-invalid", err)
			}
			if _, err := set.Decide(context.Background(), in); reason.Of(err, "") != reason.InputInvalid {
				t.Fatalf("Decide, resource attributes: err = %v, want input-invalid", err)
			}
			raw := map[string]any{"action": "orders:read", "user": map[string]any{"claims": map[string]any{"level": n}}}
			if _, err := set.EvalValue(context.Background(), raw); reason.Of(err, "") != reason.InputInvalid {
				t.Fatalf("raw input: err = %v, want input-invalid", err)
			}
		})
	}
}
