package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/policytest"
	"github.com/svc-dev/svc/reason"
)

// FuzzDecideMatchesEval decides fuzzed inputs with Decide and with Eval,
// on the default policy, on testdata/cache/nested (nested and variable
// paths) and on the resource-attributes example, and requires the same decision every time. The input is the
// JSON document raw (the zero input when raw is not one), then a copy
// with one field changed, then a copy of that with another field changed;
// each is decided more than once, so that hits, misses and near-misses of
// one long-lived cache are all compared with evaluation.
func FuzzDecideMatchesEval(f *testing.F) {
	for i, seed := range testkit.ReadGlob(f, "../../policies/fixtures/*.input.json") {
		f.Add(seed.Data, uint8(i), "", uint8(i+1), "editor")
	}
	for _, s := range []struct {
		raw    string
		field  uint8
		val    string
		field2 uint8
		val2   string
	}{
		{`{"user":{"claims":{"level":3,"field":"id"}},"resource":{"id":"ok"},"request":{"method":"GET","headers":{"x-allow-a":"YES"}}}`, 7, "b", 12, "ok"},
		{`{"user":{"claims":{"level":3.0,"field":"tenant"}},"resource":{"tenant":"ok"},"request":{"method":"PUT","headers":{"x-allow-":"yes"}}}`, 9, "1.0", 9, "1"},
		{`{"user":{"claims":{"level":null}},"request":{"method":"GET"}}`, 11, "", 9, "null"},
		{`{"user":{"claims":null,"roles":null}}`, 14, "", 15, ""},
		{`not json`, 2, "admin,viewer", 0, "orders:delete"},
		{`{"action":"orders:update","user":{"id":"u-1","tenant_id":"acme"},"resource":{"tenant":"acme","attributes":{"owner":"u-1","status":"open"}},"tenant":{"id":"acme"}}`, 16, "u-2", 17, "archived"},
		{`{"action":"orders:read","user":{"id":"u-1","claims":{"field":"attributes"}},"resource":{"attributes":{"owner":"u-1"}}}`, 16, "u-1", 16, ""},
	} {
		f.Add([]byte(s.raw), s.field, s.val, s.field2, s.val2)
	}
	attrs, err := policy.Load("../../examples/policies/resource-attributes")
	if err != nil {
		f.Fatal(err)
	}
	sets := []*policy.Set{policytest.Default(f), mustNested(f), attrs}
	f.Fuzz(func(t *testing.T, raw []byte, field uint8, val string, field2 uint8, val2 string) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var in policy.Input
		if dec.Decode(&in) != nil {
			in = policy.Input{}
		}
		a := change(in, field, val)
		b := change(a, field2, val2)
		for _, set := range sets {
			for _, x := range []policy.Input{in, in, a, b, in, a, b} {
				sameDecision(t, set, x)
			}
		}
	})
}

// sameDecision fails unless Decide and Eval agree on in: the same
// decision, or errors with the same code.
func sameDecision(t *testing.T, set *policy.Set, in policy.Input) {
	t.Helper()
	ctx := context.Background()
	want, wantErr := evalWhole(ctx, set, in)
	pruned, prunedErr := set.Eval(ctx, in)
	if (prunedErr == nil) != (wantErr == nil) || reason.Of(prunedErr, "") != reason.Of(wantErr, "") {
		t.Fatalf("eval error %v, whole-input eval error %v for %+v", prunedErr, wantErr, in)
	}
	if pruned.Allow != want.Allow || !slices.Equal(pruned.DenyReasons, want.DenyReasons) {
		t.Fatalf("eval %+v, whole-input eval %+v for %+v", pruned, want, in)
	}
	got, err := set.Decide(ctx, in)
	if (err == nil) != (wantErr == nil) || reason.Of(err, "") != reason.Of(wantErr, "") {
		t.Fatalf("decide error %v, eval error %v for %+v", err, wantErr, in)
	}
	if got.Allow != want.Allow || !slices.Equal(got.DenyReasons, want.DenyReasons) || got.Revision != want.Revision {
		t.Fatalf("decide %+v, eval %+v for %+v", got, want, in)
	}
	if err == nil && (got.DecisionID == "" || got.DecisionID == want.DecisionID) {
		t.Fatalf("decision id %q is empty or reused", got.DecisionID)
	}
}

// change returns a copy of in with one field, chosen by field, set from
// val; in itself is left as it is.
func change(in policy.Input, field uint8, val string) policy.Input {
	out := in
	out.User.Roles = slices.Clone(in.User.Roles)
	out.User.Claims = maps.Clone(in.User.Claims)
	out.Resource.Attributes = maps.Clone(in.Resource.Attributes)
	attr := func(k string, v any) {
		if out.Resource.Attributes == nil {
			out.Resource.Attributes = map[string]any{}
		}
		out.Resource.Attributes[k] = v
	}
	if in.Request != nil {
		req := *in.Request
		req.Headers = maps.Clone(in.Request.Headers)
		out.Request = &req
	}
	claim := func(k string, v any) {
		if out.User.Claims == nil {
			out.User.Claims = map[string]any{}
		}
		out.User.Claims[k] = v
	}
	header := func(k, v string) {
		if out.Request == nil {
			out.Request = &policy.Request{Method: "GET", Path: "/"}
		}
		if out.Request.Headers == nil {
			out.Request.Headers = map[string]string{}
		}
		out.Request.Headers[k] = v
	}
	switch field % 18 {
	case 0:
		out.Action = val
	case 1:
		out.User.Role = val
	case 2:
		out.User.Roles = strings.Split(val, ",")
	case 3:
		out.User.TenantID = val
	case 4:
		out.Resource.Tenant = val
	case 5:
		out.Tenant.ID = val
	case 6:
		out.Tenant.Plan = val
	case 7:
		header("x-allow-"+val, "yes")
	case 8:
		header("x-request-id", val)
	case 9:
		// A number when val is one; JSON null leaves n empty, which is
		// not a number.
		var n json.Number
		if json.Unmarshal([]byte(val), &n) == nil && n != "" {
			claim("level", n)
		} else {
			claim("level", val)
		}
	case 10:
		claim("field", val)
	case 11:
		delete(out.User.Claims, "level")
	case 12:
		out.Resource.ID = val
	case 13:
		if out.Request == nil {
			out.Request = &policy.Request{Path: "/"}
		}
		out.Request.Method = val
	case 14:
		out.User.Claims = nil
	case 15:
		out.User.Roles = nil
	case 16:
		attr("owner", val)
	case 17:
		attr("status", val)
	}
	return out
}
