package live

import (
	"testing"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/wire/filter"
)

// TestFilterFieldsOfADecision: every field the log tail filter names
// reads the right part of a decision, in its log record (the logs
// stream) and in its audit record (the decisions stream).
func TestFilterFieldsOfADecision(t *testing.T) {
	denied := audit.Record{
		DecisionID: "d-1", Tenant: "acme", UserID: "u-1", Action: "orders:delete",
		Resource: audit.Resource{Type: "orders", ID: "7", Tenant: "acme"},
		Reason:   "policy-deny", DenyReasons: []string{"role-forbidden: viewer cannot orders:delete"},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", Source: "envoy",
	}
	tests := []struct {
		expr string
		want bool
	}{
		{"policy.result=denied", true},
		{"policy.result=allowed", false},
		{"user_id=u-1", true},
		{"user_id=u-2", false},
		{"tenant=acme", true},
		{"tenant!=acme", false},
		{"trace_id=4bf92f3577b34da6a3ce929d0e0e4736", true},
		{"trace_id=00000000000000000000000000000000", false},
		{"level=warn", true},
		{"level=WARN", true},
		{"level=info", false},
		{"reason=policy-deny", true},
		{"reason=policy-allow", false},
		{"action=orders:delete", true},
		{"action=orders:read", false},
		{"tenant=globex OR tenant=acme AND action=orders:delete", true},
		{"(tenant=globex OR tenant=acme) AND action=orders:read", false},
		{"decision_id=d-1 AND source=envoy AND simulated=false", true},
	}
	log := DecisionLogRecord(denied)
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			e, err := filter.Parse(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.Match(logField(log)); got != tt.want {
				t.Errorf("log record: %s = %v, want %v", tt.expr, got, tt.want)
			}
			if got := e.Match(decisionField(denied)); got != tt.want {
				t.Errorf("decision record: %s = %v, want %v", tt.expr, got, tt.want)
			}
		})
	}
}
