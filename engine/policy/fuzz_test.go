package policy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"
)

// FuzzEvalValue feeds arbitrary JSON documents to the default policy as
// input. Evaluation must never fail or panic, and the decision must be
// coherent: allowed exactly when there is no deny reason, and a denial
// always explained by a specific reason rather than the fallback. Since
// the default policy computes its reasons only for denied requests, the
// reasons are also computed for allowed ones here: there must be none.
func FuzzEvalValue(f *testing.F) {
	seeds, err := filepath.Glob("../../policies/fixtures/*.input.json")
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range seeds {
		raw, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, s := range []string{`null`, `"orders:read"`, `[]`, `{"action":{"a":1},"user":[]}`, `{"user":{"roles":"admin"}}`} {
		f.Add([]byte(s))
	}
	set := mustDefault(f)
	explained, err := rego.New(
		rego.Query("x := data.svc.authz.explained"),
		rego.Compiler(set.Compiler()),
		rego.Store(set.Storage()),
	).PrepareForEval(context.Background())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var input any
		if dec.Decode(&input) != nil {
			t.Skip("not JSON")
		}
		res, err := set.EvalValue(context.Background(), input)
		if err != nil {
			t.Fatalf("eval of %s: %v", raw, err)
		}
		if res.Allow != (len(res.DenyReasons) == 0) {
			t.Fatalf("allow=%v with reasons %q for %s", res.Allow, res.DenyReasons, raw)
		}
		if slices.Contains(res.DenyReasons, "policy-denied") {
			t.Fatalf("denial without a specific reason for %s", raw)
		}
		if res.Allow {
			rs, err := explained.Eval(context.Background(), rego.EvalInput(input))
			if err != nil || len(rs) != 1 {
				t.Fatalf("explained: %v, %d results", err, len(rs))
			}
			if got := rs[0].Bindings["x"].([]any); len(got) != 0 {
				t.Fatalf("allowed, yet the policy finds reasons %v for %s", got, raw)
			}
		}
		if res.DenyReasons == nil || !slices.IsSorted(res.DenyReasons) {
			t.Fatalf("reasons %q not a sorted, non-nil list", res.DenyReasons)
		}
	})
}
