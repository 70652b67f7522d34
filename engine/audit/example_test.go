package audit_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/svc-dev/svc/engine/audit"
)

func Example() {
	l := audit.New(os.Stdout, audit.Options{})
	l.Log(audit.Record{
		Time:           time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
		DecisionID:     "d-1",
		TraceID:        "4bf92f3577b34da6a3ce929d0e0e4736",
		Tenant:         "acme",
		UserID:         "user-42",
		Action:         "orders:delete",
		Resource:       audit.Resource{Type: "orders", ID: "o-17", Tenant: "acme"},
		DenyReasons:    []string{"missing-role"},
		Reason:         "policy-deny",
		PolicyRevision: "rev-7",
		LatencyUS:      42,
		Simulated:      true,
		Source:         audit.SourceDryRun,
	})
	if err := l.Close(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Printf("%+v\n", l.Stats())
	// Output:
	// {"time":"2025-06-01T12:00:00Z","decision_id":"d-1","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","tenant":"acme","user_id":"user-42","action":"orders:delete","resource":{"type":"orders","id":"o-17","tenant":"acme"},"allow":false,"deny_reasons":["missing-role"],"reason":"policy-deny","policy_revision":"rev-7","latency_us":42,"simulated":true,"source":"dry-run"}
	// {Written:1 Dropped:0 Failed:0 QueueLen:0 QueueCap:4096}
}
