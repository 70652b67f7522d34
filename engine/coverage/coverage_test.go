package coverage_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/engine/coverage"
	"github.com/svc-dev/svc/engine/policy"
)

func input(role, userTenant, tenant string) map[string]any {
	return map[string]any{
		"user":   map[string]any{"role": role, "tenant_id": userTenant},
		"tenant": map[string]any{"id": tenant},
	}
}

func TestMeasure(t *testing.T) {
	set, err := policy.Load("testdata/policy")
	if err != nil {
		t.Fatal(err)
	}
	const file = "testdata/policy/authz.rego"
	tests := []struct {
		name   string
		inputs []any
		want   coverage.File
	}{
		{
			name:   "no inputs",
			inputs: nil,
			want: coverage.File{
				File: file, Covered: []coverage.Range{},
				NotCovered:      []coverage.Range{{3, 3}, {5, 7}, {10, 12}, {15, 17}},
				NotCoveredLines: 10,
			},
		},
		{
			name:   "an admin of the tenant",
			inputs: []any{input("admin", "acme", "acme")},
			want: coverage.File{
				File: file, Covered: []coverage.Range{{5, 7}, {11, 11}, {16, 16}},
				NotCovered:   []coverage.Range{{3, 3}, {10, 10}, {12, 12}, {15, 15}, {17, 17}},
				CoveredLines: 5, NotCoveredLines: 5, Percent: 50,
			},
		},
		{
			name:   "every branch",
			inputs: []any{input("admin", "acme", "acme"), input("viewer", "acme", "globex")},
			want: coverage.File{
				File: file, Covered: []coverage.Range{{3, 3}, {5, 7}, {10, 12}, {15, 17}},
				NotCovered:   []coverage.Range{},
				CoveredLines: 10, Percent: 100,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := coverage.Measure(context.Background(), set, tt.inputs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]coverage.File{tt.want}, r.Files); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if r.Percent != tt.want.Percent || r.CoveredLines != tt.want.CoveredLines || r.Inputs != len(tt.inputs) {
				t.Errorf("totals %+v, want %v%% of %d lines", r, tt.want.Percent, tt.want.CoveredLines)
			}
		})
	}
}

func TestMeasureDefaultPolicy(t *testing.T) {
	set, err := policy.Load("../../policies")
	if err != nil {
		t.Fatal(err)
	}
	r, err := coverage.Measure(context.Background(), set, []any{input("admin", "acme", "acme")})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Files) != 1 || r.Percent <= 0 || r.Percent >= 100 {
		t.Errorf("one input should cover part of the default policy: %+v", r)
	}
}
