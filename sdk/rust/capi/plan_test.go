//go:build cgo

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/idptest"
	"github.com/svc-dev/svc/plan"
)

func TestABIPlanResources(t *testing.T) {
	h, p := openTestEngine(t)
	viewer := p.Token(t, idptest.Claims("user-1", "acme", "viewer"))

	var got planResult
	// A conditional plan is longer than the test's 256-byte buffer: it
	// comes back in malloc'd memory.
	ans := abiPlan(h, viewer, "orders:read", "orders", "sqlite")
	if err := json.Unmarshal([]byte(ans), &got); err != nil {
		t.Fatalf("%v: %s", err, ans)
	}
	if got.Kind != plan.Conditional || got.Condition == nil || got.Reason != "plan-conditional" ||
		got.Subject != "user-1" || got.DecisionID == "" || !strings.Contains(got.SQL.Where, "?") {
		t.Errorf("viewer's plan = %s", ans)
	}
	if len(got.SQL.Params) == 0 || got.SQL.Params[0] != "acme" {
		t.Errorf("params = %v, want the tenant", got.SQL.Params)
	}

	for _, tc := range []struct{ name, token, action, dialect, kind, reason string }{
		{"no role grants it", viewer, "orders:delete", "", "always_denied", ""},
		{"a refused token", "not-a-token", "orders:read", "postgres", "always_denied", "token-malformed"},
	} {
		ans := abiPlan(h, tc.token, tc.action, "orders", tc.dialect)
		var got planResult
		if err := json.Unmarshal([]byte(ans), &got); err != nil {
			t.Fatalf("%s: %v: %s", tc.name, err, ans)
		}
		if string(got.Kind) != tc.kind || got.SQL.Where != plan.WhereFalse || got.Condition != nil ||
			(tc.reason != "" && string(got.Reason) != tc.reason) || got.SQL.Params == nil {
			t.Errorf("%s: %s", tc.name, ans)
		}
	}

	for _, tc := range []struct{ name, action, dialect string }{
		{"no action", "", "sqlite"},
		{"an unknown dialect", "orders:read", "oracle"},
		{"a name too long", strings.Repeat("a", maxNameBytes+1), "sqlite"},
	} {
		ans := abiPlan(h, viewer, tc.action, "orders", tc.dialect)
		if !strings.HasPrefix(ans, `{"error":{"reason":"input-`) {
			t.Errorf("%s: %s", tc.name, ans)
		}
	}
}
