package otelhist_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/internal/otelhist"
)

var (
	bounds = []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05}
	scope  = otelhist.Scope{Name: "example.com/hist", Version: "v1.2.3", SchemaURL: "https://opentelemetry.io/schemas/1.43.0"}
)

const (
	name = "svc.test.duration"
	desc = "Time to do the thing."
	unit = "s"
)

// sampled is a context with a sampled span of trace and span ids made
// from i.
func sampled(i int) context.Context {
	var tid trace.TraceID
	var sid trace.SpanID
	tid[0], tid[15] = byte(i>>8)|1, byte(i)
	sid[0], sid[7] = byte(i>>8)|1, byte(i)
	return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
	}))
}

func TestSameHistogram(t *testing.T) {
	reg := otelhist.NewRegistry(otelhist.Options{})
	a := reg.Histogram(scope, name, desc, unit, bounds)
	if b := reg.Histogram(scope, name, desc, unit, []float64{0.05, 0.01, 0.005, 0.0025, 0.001, 0.0005, 0.00025, 0.0001, 0.00005, 0.000025, 0.00001}); a != b {
		t.Error("the same identity gave two histograms")
	}
	if c := reg.Histogram(scope, name, "other", unit, bounds); a == c {
		t.Error("another description gave the same histogram")
	}
	set := attribute.NewSet(attribute.String("k", "v"))
	if a.Bind(set) != a.Bind(attribute.NewSet(attribute.String("k", "v"))) {
		t.Error("equal sets gave two series")
	}
}

func TestFrom(t *testing.T) {
	mp := noop.NewMeterProvider()
	if otelhist.From(mp) != nil {
		t.Error("a plain provider has a registry")
	}
	reg := otelhist.NewRegistry(otelhist.Options{})
	if otelhist.From(provider{mp, reg}) != reg {
		t.Error("a Provider's registry not found")
	}
}

type provider struct {
	noop.MeterProvider
	reg *otelhist.Registry
}

func (p provider) Histograms() *otelhist.Registry { return p.reg }

func TestOptionsFromEnv(t *testing.T) {
	t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "")
	t.Setenv("OTEL_GO_X_CARDINALITY_LIMIT", "")
	o := otelhist.OptionsFromEnv()
	if o.CardinalityLimit != otelhist.DefaultCardinalityLimit || o.Filter(sampled(1)) != true || o.Filter(context.Background()) {
		t.Errorf("defaults: %+v", o)
	}
	t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "Always_On")
	t.Setenv("OTEL_GO_X_CARDINALITY_LIMIT", "10")
	if o := otelhist.OptionsFromEnv(); o.CardinalityLimit != 10 || !o.Filter(context.Background()) {
		t.Errorf("always_on, 10: %+v", o)
	}
	t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "always_off")
	t.Setenv("OTEL_GO_X_CARDINALITY_LIMIT", "x")
	if o := otelhist.OptionsFromEnv(); o.CardinalityLimit != otelhist.DefaultCardinalityLimit || o.Filter(sampled(1)) {
		t.Errorf("always_off, x: %+v", o)
	}
}
