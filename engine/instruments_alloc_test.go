package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// decisionTelemetry runs the telemetry of one allowed decision the way
// Authorize does.
func decisionTelemetry(tel *instruments, ctx context.Context) {
	vctx, vspan := tel.startVerify(ctx)
	tel.endVerify(vctx, vspan, TokenDecision{Allowed: true, Reason: reason.OK, TenantID: "acme"})
	ectx, espan := tel.startEval(ctx)
	d := Decision{Allow: true, Reason: reason.PolicyAllow, DenyReasons: []string{}, DecisionID: "d-1", Revision: "r1"}
	tel.endEval(ectx, espan, Input{Action: "orders:read", Resource: policy.Resource{Type: "orders", ID: "1"}}, d, nil, false)
	tel.decided(ctx, reason.PolicyAllow, true, 120*time.Microsecond)
}

func newTestInstruments(t *testing.T, sampler sdktrace.Sampler) (*instruments, *sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(rec))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tel, err := newInstruments(tp, mp, &Engine{})
	if err != nil {
		t.Fatal(err)
	}
	return tel, tp, rec
}

// TestUnsampledDecisionAllocs: under a server span the sampler dropped,
// a decision's telemetry (child spans, counter, histogram) allocates
// nothing.
func TestUnsampledDecisionAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	tel, tp, rec := newTestInstruments(t, sdktrace.ParentBased(sdktrace.NeverSample()))
	ctx, server := tp.Tracer("server").Start(context.Background(), "Check", trace.WithSpanKind(trace.SpanKindServer))
	defer server.End()
	decisionTelemetry(tel, ctx) // binds the attribute set once
	if n := testing.AllocsPerRun(200, func() { decisionTelemetry(tel, ctx) }); n > 0 {
		t.Errorf("an unsampled decision's telemetry allocates %.0f times, want 0", n)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded under a dropped parent, want none", n)
	}
}

// TestChildSpansFollowTheSampler: a child span is left out only where
// the SDK would have dropped it, for the samplers OpenTelemetry offers
// and parents of every kind; where it is started, it is recorded as
// before, under its parent.
func TestChildSpansFollowTheSampler(t *testing.T) {
	samplers := map[string]sdktrace.Sampler{
		"always_on":                sdktrace.AlwaysSample(),
		"always_off":               sdktrace.NeverSample(),
		"traceidratio":             sdktrace.TraceIDRatioBased(0.5),
		"parentbased_always_on":    sdktrace.ParentBased(sdktrace.AlwaysSample()),
		"parentbased_always_off":   sdktrace.ParentBased(sdktrace.NeverSample()),
		"parentbased_traceidratio": sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.5)),
	}
	for name, sampler := range samplers {
		t.Run(name, func(t *testing.T) {
			tel, tp, _ := newTestInstruments(t, sampler)
			parents := map[string]func(int) context.Context{
				"none": func(int) context.Context { return context.Background() },
				"local": func(int) context.Context {
					ctx, _ := tp.Tracer("server").Start(context.Background(), "Check")
					return ctx
				},
				"remote sampled":   func(i int) context.Context { return remote(i, trace.FlagsSampled) },
				"remote unsampled": func(i int) context.Context { return remote(i, 0) },
			}
			skipped := 0
			for kind, parent := range parents {
				for i := range 64 {
					ctx := parent(i)
					_, direct := tel.tracer.Start(ctx, SpanEvaluate, tel.internal...)
					_, span := tel.startEval(ctx)
					// A span of the SDK, recorded or not, has a valid context.
					if !span.SpanContext().IsValid() {
						skipped++
						if direct.IsRecording() {
							t.Fatalf("parent %s #%d: startEval left out a span the SDK records", kind, i)
						}
					} else if got, want := span.SpanContext().TraceID(), trace.SpanContextFromContext(ctx).TraceID(); want.IsValid() && got != want {
						t.Fatalf("parent %s #%d: child in trace %s, want %s", kind, i, got, want)
					}
					span.End()
					direct.End()
				}
			}
			// Every sampler but always_on drops some local parents.
			if name != "always_on" && name != "parentbased_always_on" && skipped == 0 {
				t.Errorf("no child span was left out")
			}
		})
	}
}

// remote is the i-th caller's trace context with the given flags.
func remote(i int, flags trace.TraceFlags) context.Context {
	var tid trace.TraceID
	copy(tid[:], fmt.Sprintf("%016x", uint64(i)*0x9e3779b97f4a7c15))
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: flags, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

// BenchmarkDecisionTelemetry measures a decision's telemetry under a
// server span the sampler dropped.
func BenchmarkDecisionTelemetry(b *testing.B) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())), sdktrace.WithSpanProcessor(rec))
	benchDecisionTelemetry(b, tp, sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())))
}

// benchDecisionTelemetry measures decisionTelemetry of instruments on tp
// and mp under a server span of tp, which its sampler drops.
func benchDecisionTelemetry(b *testing.B, tp trace.TracerProvider, mp metric.MeterProvider) {
	benchInstruments(b, tp, mp, &Engine{}, decisionTelemetry)
}

// benchInstruments measures op on the instruments of e on tp and mp,
// under a server span of tp.
func benchInstruments(b *testing.B, tp trace.TracerProvider, mp metric.MeterProvider, e *Engine, op func(*instruments, context.Context)) {
	tel, err := newInstruments(tp, mp, e)
	if err != nil {
		b.Fatal(err)
	}
	ctx, server := tp.Tracer("server").Start(context.Background(), "Check")
	defer server.End()
	b.ReportAllocs()
	for b.Loop() {
		op(tel, ctx)
	}
}

// TestUntracedDecisionAllocs: with OpenTelemetry's no-op tracer provider
// (the C ABI's without an OTLP endpoint) a decision's telemetry starts no
// span, allocates nothing, and leaves the caller's context as it was, so
// a caller's span is still the one its context carries.
func TestUntracedDecisionAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tel, err := newInstruments(noop.NewTracerProvider(), mp, &Engine{})
	if err != nil {
		t.Fatal(err)
	}
	if !tel.untraced {
		t.Fatal("the no-op tracer provider is not taken as untraced")
	}
	caller := remote(7, trace.FlagsSampled)
	for name, start := range map[string]func(context.Context) (context.Context, trace.Span){
		"verify": tel.startVerify, "eval": tel.startEval,
	} {
		ctx, span := start(caller)
		if ctx != caller || span.IsRecording() || span.SpanContext().IsValid() {
			t.Errorf("%s: a span was started under the no-op provider (context changed: %v)", name, ctx != caller)
		}
	}
	decisionTelemetry(tel, caller)
	if n := testing.AllocsPerRun(200, func() { decisionTelemetry(tel, caller) }); n > 0 {
		t.Errorf("an untraced decision's telemetry allocates %.0f times, want 0", n)
	}
	if sdk, _, _ := newTestInstruments(t, sdktrace.AlwaysSample()); sdk.untraced {
		t.Error("an SDK tracer provider is taken as untraced")
	}
}
