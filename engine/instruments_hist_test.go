package engine

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/histtest"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
	"github.com/svc-dev/svc/reason"
)

// TestDecisionLatencyHistograms: svc.decision.duration recorded in the
// provider's otelhist.Registry is exported as the SDK's histogram is,
// for the same decisions, and svc.decisions is unchanged.
func TestDecisionLatencyHistograms(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	sdkReader := sdkmetric.NewManualReader()
	sdkMP := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkReader))
	sdkTel, err := newInstruments(tp, sdkMP, &Engine{policies: policy.NewStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	histMP, histReader := histtest.Provider()
	histTel, err := newInstruments(tp, histMP, &Engine{policies: policy.NewStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if histTel.hist == nil || histTel.latency != nil || sdkTel.hist != nil {
		t.Fatal("the histogram is not recorded where the provider offers")
	}
	codes := []reason.Code{reason.PolicyAllow, reason.PolicyDeny, reason.TokenExpired, reason.SignatureInvalid}
	r := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		code := codes[r.IntN(len(codes))]
		lat := time.Duration(r.ExpFloat64() * float64(300*time.Microsecond))
		sdkTel.decided(context.Background(), code, code == reason.PolicyAllow, lat)
		histTel.decided(context.Background(), code, code == reason.PolicyAllow, lat)
	}
	want, got := collectMetrics(t, sdkReader), collectMetrics(t, histReader)
	metricdatatest.AssertEqual(t, want, got, metricdatatest.IgnoreTimestamp())
	// The sampled ones, one per series and bucket at most, so that the
	// exemplar each keeps is that one.
	for i, code := range codes {
		ctx, span := tp.Tracer("t").Start(context.Background(), "Check")
		lat := time.Duration(i+1) * 7 * time.Millisecond
		sdkTel.decided(ctx, code, code == reason.PolicyAllow, lat)
		histTel.decided(ctx, code, code == reason.PolicyAllow, lat)
		span.End()
	}
	want, got = collectMetrics(t, sdkReader), collectMetrics(t, histReader)
	metricdatatest.AssertEqual(t, want, got, metricdatatest.IgnoreTimestamp())
	if n := countExemplars(got); n != len(codes) {
		t.Errorf("%d exemplars, want %d", n, len(codes))
	}
}

// collectMetrics collects reader into one scope's metrics, data points
// in attribute order, sums to 12 digits (the SDK's last digits depend on
// when it was collected).
func collectMetrics(t *testing.T, reader *sdkmetric.ManualReader) metricdata.ScopeMetrics {
	t.Helper()
	var out metricdata.ScopeMetrics
	for _, sm := range metrictest.Collect(t, reader).ScopeMetrics {
		out.Scope = sm.Scope
		out.Metrics = append(out.Metrics, sm.Metrics...)
	}
	slices.SortFunc(out.Metrics, func(a, b metricdata.Metrics) int { return strings.Compare(a.Name, b.Name) })
	enc := attribute.DefaultEncoder()
	for _, m := range out.Metrics {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			slices.SortFunc(d.DataPoints, func(a, b metricdata.HistogramDataPoint[float64]) int {
				return strings.Compare(a.Attributes.Encoded(enc), b.Attributes.Encoded(enc))
			})
		case metricdata.Sum[int64]:
			slices.SortFunc(d.DataPoints, func(a, b metricdata.DataPoint[int64]) int {
				return strings.Compare(a.Attributes.Encoded(enc), b.Attributes.Encoded(enc))
			})
		}
	}
	return out
}

func countExemplars(sm metricdata.ScopeMetrics) int {
	n := 0
	for _, m := range sm.Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
			for _, dp := range h.DataPoints {
				n += len(dp.Exemplars)
			}
		}
	}
	return n
}

// TestUnsampledDecisionAllocsHist: with the otelhist histogram too, a
// decision's telemetry under a dropped server span allocates nothing.
func TestUnsampledDecisionAllocsHist(t *testing.T) {
	testkit.SkipUnderRace(t)
	mp, _ := histtest.Provider()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	tel, err := newInstruments(tp, mp, &Engine{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, server := tp.Tracer("server").Start(context.Background(), "Check", trace.WithSpanKind(trace.SpanKindServer))
	defer server.End()
	decisionTelemetry(tel, ctx)
	if n := testing.AllocsPerRun(200, func() { decisionTelemetry(tel, ctx) }); n > 0 {
		t.Errorf("an unsampled decision's telemetry allocates %.0f times, want 0", n)
	}
}

// BenchmarkDecisionTelemetryHist is BenchmarkDecisionTelemetry with the
// histogram in an otelhist.Registry, as the sidecar records it.
func BenchmarkDecisionTelemetryHist(b *testing.B) {
	mp, _ := histtest.Provider()
	benchDecisionTelemetry(b, sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample()))), mp)
}

// BenchmarkDecided measures recording a decision (counter and latency)
// under a dropped server span, with the SDK's histogram and with the
// otelhist one.
func BenchmarkDecided(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	hist, _ := histtest.Provider()
	for name, mp := range map[string]metric.MeterProvider{
		"sdk":      sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
		"otelhist": hist,
	} {
		b.Run(name, func(b *testing.B) {
			benchInstruments(b, tp, mp, &Engine{policies: policy.NewStore(nil)}, func(tel *instruments, ctx context.Context) {
				tel.decided(ctx, reason.PolicyAllow, true, 120*time.Microsecond)
			})
		})
	}
}
