package telemetry

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/internal/testkit"
)

// decisionSpan is an ended policy.evaluate span as the SDK hands it to
// its processors.
func decisionSpan(end time.Time) tracetest.SpanStub {
	return tracetest.SpanStub{
		Name: "policy.evaluate", SpanKind: trace.SpanKindInternal,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}),
		Parent:      trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{3}}),
		StartTime:   end.Add(-time.Millisecond), EndTime: end,
		Attributes: []attribute.KeyValue{
			attribute.String("svc.tenant", "acme"), attribute.String("svc.result", "allow"),
			attribute.StringSlice("svc.deny_reasons", nil), attribute.Int("n", 3),
		},
	}
}

// TestSpanFeedKeepsUnreadSpansAsTheyAre: a span nobody watches is kept
// without being converted (no allocation), and is converted when read,
// to what converting it at once gave.
func TestSpanFeedKeepsUnreadSpansAsTheyAre(t *testing.T) {
	sf := NewSpanFeed(8)
	end := time.Now()
	ro := decisionSpan(end).Snapshot()
	for range 10 {
		sf.OnEnd(ro)
	}
	if !testkit.RaceEnabled {
		if n := testing.AllocsPerRun(100, func() { sf.OnEnd(ro) }); n != 0 {
			t.Errorf("OnEnd of an unwatched span allocates %.0f times, want 0", n)
		}
	}
	recent := sf.Recent(nil, time.Time{})
	if len(recent) != 8 {
		t.Fatalf("%d spans kept, want the ring's 8", len(recent))
	}
	if d := cmp.Diff(spanRecord(ro), recent[0]); d != "" {
		t.Errorf("kept span read back (-converted at once +read):\n%s", d)
	}

	// A watcher gets the same record, live and from the backlog.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := sf.Watch(ctx, nil, end)
	backlog := <-sub.C
	sf.OnEnd(ro)
	live := <-sub.C
	if d := cmp.Diff(backlog, live); d != "" || backlog.Name != "policy.evaluate" {
		t.Errorf("backlog and live records differ (-backlog +live):\n%s", d)
	}
}

// BenchmarkSpanFeedUnwatched measures keeping an ended span nobody
// watches.
func BenchmarkSpanFeedUnwatched(b *testing.B) {
	sf := NewSpanFeed(DefaultFeedSize)
	ro := decisionSpan(time.Now()).Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		sf.OnEnd(ro)
	}
}
