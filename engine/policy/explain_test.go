package policy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/policytest"
)

func TestExplain(t *testing.T) {
	set := policytest.Default(t)
	denied := benchInput()
	denied.Action = "reports:export"
	denied.User.Role, denied.User.Roles = "viewer", []string{"viewer"}
	denied.Resource.Tenant = "globex"
	denied.Tenant.Plan = "free"
	tests := []struct {
		name      string
		in        policy.Input
		wantAllow bool
	}{
		{"allowed", benchInput(), true},
		{"denied", denied, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, rules, err := set.Explain(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := set.Eval(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allow != tt.wantAllow || res.Allow != plain.Allow || strings.Join(res.DenyReasons, "|") != strings.Join(plain.DenyReasons, "|") {
				t.Fatalf("Explain decided %+v, Eval %+v", res, plain)
			}
			var b strings.Builder
			for _, r := range rules {
				b.WriteString(r.String())
				b.WriteByte('\n')
			}
			golden(t, "explain-"+tt.name+".txt", b.String())
		})
	}
}
