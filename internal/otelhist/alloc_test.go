package otelhist_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/svc-dev/svc/internal/otelhist"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/histtest"
)

// TestRecordAllocs: a measurement allocates nothing, sampled or not.
func TestRecordAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	reg := otelhist.NewRegistry(otelhist.Options{})
	s := reg.Histogram(scope, name, desc, unit, bounds).Bind(attribute.NewSet(attribute.String("k", "v")))
	ctx := histtest.Sampled(3)
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"unsampled", context.Background()}, {"sampled", ctx}} {
		if n := testing.AllocsPerRun(1000, func() { s.Record(c.ctx, 0.0003) }); n != 0 {
			t.Errorf("%s: %v allocations per record, want 0", c.name, n)
		}
	}
}

func BenchmarkRecord(b *testing.B) {
	reg := otelhist.NewRegistry(otelhist.Options{})
	s := reg.Histogram(scope, name, desc, unit, bounds).Bind(attribute.NewSet(attribute.String("k", "v")))
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.Record(ctx, 0.0003)
		}
	})
}
