package telemetry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/wire"
)

// SpanRecord is the compact form of a finished span kept by a SpanFeed;
// its JSON form is the local API's (package wire).
type SpanRecord = wire.SpanRecord

// SpanFeed is a span processor that keeps the most recent finished spans in
// a bounded ring buffer and streams them to subscribers. It is what trace
// tailing and dry-run sessions read. Ending a span never waits for a
// subscriber.
type SpanFeed struct {
	// f keeps the SDK's read-only spans: a span becomes a SpanRecord only
	// when it is read, and most are not (every span is kept for a trace
	// tail's replay while spans are exported, watched or not).
	f *feed[sdktrace.ReadOnlySpan, SpanRecord]
}

var _ sdktrace.SpanProcessor = (*SpanFeed)(nil)

// NewSpanFeed returns a SpanFeed keeping the last size spans
// (DefaultFeedSize when size ≤ 0).
func NewSpanFeed(size int) *SpanFeed {
	return &SpanFeed{f: newViewFeed(size,
		func(s *sdktrace.ReadOnlySpan) time.Time { return (*s).EndTime() },
		spanRecord)}
}

// OnStart implements sdktrace.SpanProcessor; started spans are not kept.
func (*SpanFeed) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor: it keeps s and hands it to
// the subscribers whose filter accepts it. The SDK's ended span is
// immutable, so it is kept as it is.
func (sf *SpanFeed) OnEnd(s sdktrace.ReadOnlySpan) {
	sf.f.publish(s)
}

// Shutdown implements sdktrace.SpanProcessor: it ends every subscription.
func (sf *SpanFeed) Shutdown(context.Context) error {
	sf.f.close()
	return nil
}

// ForceFlush implements sdktrace.SpanProcessor; there is nothing to flush.
func (*SpanFeed) ForceFlush(context.Context) error { return nil }

// Subscribe streams the buffered spans that ended at or after since (all
// of them for a zero since) and then live ones, each only when filter (nil
// means all) accepts it. The channel is closed when ctx ends or the feed
// shuts down. A subscriber that falls more than SubscriberBuffer spans
// behind misses spans; filter runs while the feed is locked, so it must be
// quick and must not call the feed.
func (sf *SpanFeed) Subscribe(ctx context.Context, filter func(SpanRecord) bool, since time.Time) <-chan SpanRecord {
	return sf.f.subscribe(ctx, filter, since)
}

// Watch is Subscribe returning the Subscription, which also counts the
// spans this subscriber missed.
func (sf *SpanFeed) Watch(ctx context.Context, filter func(SpanRecord) bool, since time.Time) *Subscription[SpanRecord] {
	return sf.f.watch(ctx, filter, since)
}

// Recent returns the buffered spans, oldest first, that ended at or after
// since and that filter (nil means all) accepts.
func (sf *SpanFeed) Recent(filter func(SpanRecord) bool, since time.Time) []SpanRecord {
	return sf.f.recent(filter, since)
}

// Stats returns the feed's counters.
func (sf *SpanFeed) Stats() FeedStats { return sf.f.stats() }

// Watched reports whether the feed has a live subscriber.
func (sf *SpanFeed) Watched() bool { return sf.f.live.Load() > 0 }

// watchedSampler records a trace only while the span feed has a live
// subscriber. It is the sampler when no OTLP endpoint is configured: then
// nothing but a live tail consumes spans, and a span nobody records costs
// a fraction of a recorded one on every decision.
type watchedSampler struct{ feed *SpanFeed }

func (w watchedSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if !w.feed.Watched() {
		// Checked first: it runs on every span of every decision, and the
		// parent's trace state (a walk up the context) only matters for a
		// span that is kept.
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	ts := trace.SpanContextFromContext(p.ParentContext).TraceState()
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample, Tracestate: ts}
}

func (watchedSampler) Description() string { return "WatchedBySpanFeed" }

func spanRecord(s sdktrace.ReadOnlySpan) SpanRecord {
	sc := s.SpanContext()
	r := SpanRecord{
		TraceID:  sc.TraceID().String(),
		SpanID:   sc.SpanID().String(),
		Name:     s.Name(),
		Kind:     s.SpanKind().String(),
		Service:  serviceName(s),
		Start:    s.StartTime(),
		Duration: s.EndTime().Sub(s.StartTime()),
	}
	if p := s.Parent(); p.SpanID().IsValid() {
		r.ParentID = p.SpanID().String()
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		r.Status, r.StatusMessage = "error", st.Description
	case codes.Ok:
		r.Status = "ok"
	default:
		r.Status = "unset"
	}
	if attrs := s.Attributes(); len(attrs) > 0 {
		r.Attributes = make(map[string]string, len(attrs))
		for _, kv := range attrs {
			r.Attributes[string(kv.Key)] = kv.Value.String()
		}
	}
	return r
}

func serviceName(s sdktrace.ReadOnlySpan) string {
	if res := s.Resource(); res != nil {
		if v, ok := res.Set().Value(semconv.ServiceNameKey); ok {
			return v.String()
		}
	}
	return ""
}
