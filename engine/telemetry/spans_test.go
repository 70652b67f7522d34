package telemetry

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func feedTracer(t *testing.T, feed *SpanFeed) trace.Tracer {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(feed))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("feed-test")
}

// endSpan records a span that started at start and lasted d.
func endSpan(tr trace.Tracer, name string, start time.Time, d time.Duration) {
	_, s := tr.Start(context.Background(), name, trace.WithTimestamp(start))
	s.End(trace.WithTimestamp(start.Add(d)))
}

func names(recs []SpanRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Name
	}
	return out
}

func receive(t *testing.T, ch <-chan SpanRecord, n int) []SpanRecord {
	t.Helper()
	var out []SpanRecord
	for range n {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %d of %d spans", len(out), n)
			}
			out = append(out, r)
		case <-time.After(5 * time.Second):
			t.Fatalf("received %d of %d spans", len(out), n)
		}
	}
	return out
}

func TestSpanFeedRingBound(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size, n   int
		wantFirst int
	}{
		{"not_full", 8, 5, 0},
		{"exactly_full", 8, 8, 0},
		{"wrapped", 8, 20, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			feed := NewSpanFeed(tc.size)
			tr := feedTracer(t, feed)
			t0 := time.Now()
			for i := range tc.n {
				endSpan(tr, fmt.Sprintf("s%d", i), t0, time.Millisecond)
			}
			var want []string
			for i := tc.wantFirst; i < tc.n; i++ {
				want = append(want, fmt.Sprintf("s%d", i))
			}
			if diff := cmp.Diff(want, names(feed.Recent(nil, time.Time{}))); diff != "" {
				t.Errorf("Recent (-want +got):\n%s", diff)
			}
			st := feed.Stats()
			if st.Published != uint64(tc.n) || st.Buffered != min(tc.n, tc.size) {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

func TestSpanFeedSubscribe(t *testing.T) {
	feed := NewSpanFeed(64)
	tr := feedTracer(t, feed)
	base := time.Now().Add(-time.Hour)
	endSpan(tr, "policy.evaluate", base, time.Second)                    // ended before since
	endSpan(tr, "auth.verify_token", base.Add(time.Minute), time.Second) // wrong name
	endSpan(tr, "policy.evaluate", base.Add(2*time.Minute), time.Second) // backlog
	since := base.Add(30 * time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	isEval := func(r SpanRecord) bool { return r.Name == "policy.evaluate" }
	ch := feed.Subscribe(ctx, isEval, since)

	endSpan(tr, "auth.verify_token", time.Now(), time.Millisecond)
	endSpan(tr, "policy.evaluate", time.Now(), time.Millisecond)
	got := receive(t, ch, 2)
	if got[0].Start != base.Add(2*time.Minute) || got[1].Start.Before(base.Add(time.Hour-time.Minute)) {
		t.Errorf("got spans starting %v and %v, want the backlog span then the live one", got[0].Start, got[1].Start)
	}
	for _, r := range got {
		if r.Name != "policy.evaluate" {
			t.Errorf("filter let %q through", r.Name)
		}
	}

	cancel()
	select {
	case r, ok := <-ch:
		if ok {
			t.Fatalf("unexpected span %q after cancel", r.Name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("channel not closed after cancel")
	}
	if n := feed.Stats().Subscribers; n != 0 {
		t.Errorf("%d subscribers left after cancel", n)
	}
}

func TestSpanFeedSlowSubscriberDrops(t *testing.T) {
	const extra = 10
	feed := NewSpanFeed(16)
	tr := feedTracer(t, feed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := feed.Subscribe(ctx, nil, time.Now())

	done := make(chan struct{})
	go func() {
		for range SubscriberBuffer + extra {
			endSpan(tr, "s", time.Now(), time.Microsecond)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("ending spans blocked on a subscriber that does not read")
	}
	if st := feed.Stats(); st.Dropped != extra || len(ch) != SubscriberBuffer {
		t.Errorf("stats = %+v, queued %d; want %d dropped and %d queued", st, len(ch), extra, SubscriberBuffer)
	}
}

func TestSpanFeedShutdownEndsSubscriptions(t *testing.T) {
	feed := NewSpanFeed(4)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(feed))
	ch := feed.Subscribe(context.Background(), nil, time.Time{})
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-ch; ok {
		t.Error("channel open after shutdown")
	}
	if _, ok := <-feed.Subscribe(context.Background(), nil, time.Time{}); ok {
		t.Error("subscription after shutdown delivered a span from an empty feed")
	}
}

func TestSpanRecordFields(t *testing.T) {
	feed := NewSpanFeed(4)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(feed),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "orders-sidecar"))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("feed-test")
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx, parent := tr.Start(context.Background(), "server", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start))
	_, child := tr.Start(ctx, "policy.evaluate", trace.WithTimestamp(start.Add(time.Millisecond)),
		trace.WithAttributes(attribute.String("svc.result", "deny"), attribute.Int("svc.count", 2),
			attribute.StringSlice("svc.deny_reasons", []string{"a", "b"})))
	child.SetStatus(codes.Error, "policy-error")
	child.End(trace.WithTimestamp(start.Add(3 * time.Millisecond)))
	parent.End(trace.WithTimestamp(start.Add(4 * time.Millisecond)))

	recs := feed.Recent(nil, time.Time{})
	if len(recs) != 2 {
		t.Fatalf("got %d spans", len(recs))
	}
	want := SpanRecord{
		TraceID:       parent.SpanContext().TraceID().String(),
		SpanID:        child.SpanContext().SpanID().String(),
		ParentID:      parent.SpanContext().SpanID().String(),
		Name:          "policy.evaluate",
		Service:       "orders-sidecar",
		Kind:          "internal",
		Start:         start.Add(time.Millisecond),
		Duration:      2 * time.Millisecond,
		Status:        "error",
		StatusMessage: "policy-error",
		Attributes:    map[string]string{"svc.result": "deny", "svc.count": "2", "svc.deny_reasons": `["a","b"]`},
	}
	if diff := cmp.Diff(want, recs[0]); diff != "" {
		t.Errorf("child record (-want +got):\n%s", diff)
	}
	if recs[1].ParentID != "" || recs[1].Kind != "server" || recs[1].Status != "unset" {
		t.Errorf("root record = %+v", recs[1])
	}
	if got := recs[0].End(); !got.Equal(start.Add(3 * time.Millisecond)) {
		t.Errorf("End() = %v", got)
	}
}

func BenchmarkSpanFeedOnEnd(b *testing.B) {
	feed := NewSpanFeed(DefaultFeedSize)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(feed))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("bench")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	feed.Subscribe(ctx, func(r SpanRecord) bool { return r.Attributes["svc.tenant"] == "acme" }, time.Now())
	attrs := trace.WithAttributes(attribute.String("svc.tenant", "acme"), attribute.String("svc.result", "allow"))
	b.ReportAllocs()
	for b.Loop() {
		_, s := tr.Start(context.Background(), "policy.evaluate", attrs)
		s.End()
	}
}

// Without an OTLP endpoint nothing exports spans, so they are recorded only
// while a live subscriber watches the feed.
func TestSpansRecordedOnlyWhenWatchedWithoutExporter(t *testing.T) {
	tel, err := Setup(context.Background(), Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	tr := tel.TracerProvider().Tracer("test")

	_, span := tr.Start(context.Background(), "policy.evaluate")
	recorded := span.IsRecording()
	span.End()
	if recorded || len(tel.Spans().Recent(nil, time.Time{})) != 0 {
		t.Fatal("span recorded with no exporter and no subscriber")
	}

	ctx, cancel := context.WithCancel(context.Background())
	ch := tel.Spans().Subscribe(ctx, nil, time.Time{})
	_, span = tr.Start(context.Background(), "auth.verify_token")
	span.End()
	select {
	case r := <-ch:
		if r.Name != "auth.verify_token" {
			t.Fatalf("got span %q", r.Name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watched span not delivered")
	}
	cancel()
	waitUnwatched := time.Now().Add(5 * time.Second)
	for tel.Spans().Watched() {
		if time.Now().After(waitUnwatched) {
			t.Fatal("feed still watched after the subscription ended")
		}
		time.Sleep(time.Millisecond)
	}
	_, span = tr.Start(context.Background(), "policy.evaluate")
	if span.IsRecording() {
		t.Fatal("span recorded after the last subscriber left")
	}
	span.End()
}
