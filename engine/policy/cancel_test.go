package policy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
)

// TestEvalCanceledDuringEvaluation checks that an evaluation stops soon
// after its context ends, deadline or cancel, with a policy error, and
// that the set evaluates normally afterwards.
func TestEvalCanceledDuringEvaluation(t *testing.T) {
	set, err := policy.FromModules(map[string]string{"slow.rego": `package svc.authz

default allow := false

allow if {
	input.slow
	some i in numbers.range(1, 5000)
	some j in numbers.range(1, 5000)
	i * j == -1
}

deny_reasons := set()
`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			return ctx, cancel
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			_, err := set.EvalValue(ctx, map[string]any{"slow": true})
			// Uncut, the evaluation takes seconds; allow for a loaded machine.
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("evaluation took %s after its context ended at 20ms", d)
			}
			if err == nil || reason.Of(err, "") != reason.PolicyError {
				t.Fatalf("error = %v, want a policy error", err)
			}
			if errors.Is(err, context.Canceled) && tt.name == "deadline" {
				t.Errorf("deadline reported as cancel: %v", err)
			}
			res, err := set.EvalValue(context.Background(), map[string]any{"slow": false})
			if err != nil || res.Allow {
				t.Fatalf("after a canceled evaluation: %+v, %v", res, err)
			}
		})
	}
}
