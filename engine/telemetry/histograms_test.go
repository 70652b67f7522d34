package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"

	"github.com/svc-dev/svc/internal/otelhist"
)

// recordBoth records through tel an SDK counter and an otelhist
// histogram in the same scope.
func recordBoth(t *testing.T, tel *Telemetry) {
	t.Helper()
	reg := otelhist.From(tel.MeterProvider())
	if reg == nil {
		t.Fatal("the meter provider offers no otelhist.Registry")
	}
	counter, err := tel.MeterProvider().Meter("telemetry-test").Int64Counter("svc.test.requests")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 3)
	s := reg.Histogram(otelhist.Scope{Name: "telemetry-test"}, "svc.test.duration", "Test durations.", "s", []float64{0.001, 0.01}).
		Bind(attribute.NewSet(attribute.String("k", "v")))
	for _, v := range []float64{0.0005, 0.005, 0.05, 0.005} {
		s.Record(context.Background(), v)
	}
}

// TestHistogramsOverOTLP: the otelhist histograms reach the collector
// cumulative, in the scope of the SDK's metrics of that scope.
func TestHistogramsOverOTLP(t *testing.T) {
	c, ctx, tel := setupWithCollector(t)
	recordBoth(t, tel)
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	found := false
	for _, req := range c.metrics {
		for _, rm := range req.GetResourceMetrics() {
			scopes := 0
			for _, sm := range rm.GetScopeMetrics() {
				if sm.GetScope().GetName() != "telemetry-test" {
					continue
				}
				scopes++
				names := map[string]*metricspb.Metric{}
				for _, m := range sm.GetMetrics() {
					names[m.GetName()] = m
				}
				h := names["svc.test.duration"].GetHistogram()
				if names["svc.test.requests"] == nil || h == nil {
					t.Fatalf("scope metrics %v, want the counter and the histogram together", names)
				}
				found = true
				if h.GetAggregationTemporality() != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
					t.Errorf("temporality %v", h.GetAggregationTemporality())
				}
				dp := h.GetDataPoints()[0]
				if dp.GetCount() != 4 || len(dp.GetBucketCounts()) != 3 || dp.GetBucketCounts()[1] != 2 ||
					dp.GetMin() != 0.0005 || dp.GetMax() != 0.05 || dp.GetStartTimeUnixNano() == 0 {
					t.Errorf("data point %v", dp)
				}
			}
			if scopes > 1 {
				t.Errorf("scope telemetry-test sent %d times", scopes)
			}
		}
	}
	if !found {
		t.Fatal("histogram not received")
	}
}

// TestHistogramsFallBack: when OTLP is to take histograms another way,
// no otelhist.Registry is offered, so every histogram stays the SDK's;
// with cumulative temporality one is.
func TestHistogramsFallBack(t *testing.T) {
	for _, tc := range []struct {
		env, value string
		offered    bool
	}{
		{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "delta", false},
		{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "lowmemory", false},
		{"OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION", "base2_exponential_bucket_histogram", false},
		{"OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "cumulative", true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			tel, err := Setup(context.Background(), Options{OTLPEndpoint: "http://127.0.0.1:1", Logger: quietLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = tel.Shutdown(ctx)
			}()
			if got := otelhist.From(tel.MeterProvider()) != nil; got != tc.offered {
				t.Errorf("otelhist.Registry offered = %v, want %v", got, tc.offered)
			}
		})
	}
}

func TestMergeScopes(t *testing.T) {
	a := instrumentation.Scope{Name: "a"}
	b := instrumentation.Scope{Name: "b", SchemaURL: "s"}
	m := func(n string) metricdata.Metrics { return metricdata.Metrics{Name: n} }
	in := []metricdata.ScopeMetrics{
		{Scope: a, Metrics: []metricdata.Metrics{m("a1"), m("a2")}},
		{Scope: b, Metrics: []metricdata.Metrics{m("b1")}},
		{Scope: a, Metrics: []metricdata.Metrics{m("a3")}},
		{Scope: instrumentation.Scope{Name: "b"}, Metrics: []metricdata.Metrics{m("b2")}},
	}
	got := mergeScopes(in)
	var desc []string
	for _, sm := range got {
		var names []string
		for _, mm := range sm.Metrics {
			names = append(names, mm.Name)
		}
		desc = append(desc, sm.Scope.Name+":"+strings.Join(names, ","))
	}
	if s := strings.Join(desc, " "); s != "a:a1,a2,a3 b:b1 b:b2" {
		t.Errorf("merged %s", s)
	}
	if len(in[0].Metrics) != 2 {
		t.Error("the reader's slices were changed")
	}
}
