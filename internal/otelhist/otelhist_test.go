package otelhist_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/svc-dev/svc/internal/otelhist"
	"github.com/svc-dev/svc/internal/testkit/histtest"
)

// The histogram of the tests, under short names.
var bounds, scope = histtest.Bounds(), histtest.Scope

const name, desc, unit = histtest.Name, histtest.Desc, histtest.Unit

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
	if o.CardinalityLimit != otelhist.DefaultCardinalityLimit || o.Filter(histtest.Sampled(1)) != true || o.Filter(context.Background()) {
		t.Errorf("defaults: %+v", o)
	}
	t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "Always_On")
	t.Setenv("OTEL_GO_X_CARDINALITY_LIMIT", "10")
	if o := otelhist.OptionsFromEnv(); o.CardinalityLimit != 10 || !o.Filter(context.Background()) {
		t.Errorf("always_on, 10: %+v", o)
	}
	t.Setenv("OTEL_METRICS_EXEMPLAR_FILTER", "always_off")
	t.Setenv("OTEL_GO_X_CARDINALITY_LIMIT", "x")
	if o := otelhist.OptionsFromEnv(); o.CardinalityLimit != otelhist.DefaultCardinalityLimit || o.Filter(histtest.Sampled(1)) {
		t.Errorf("always_off, x: %+v", o)
	}
}
