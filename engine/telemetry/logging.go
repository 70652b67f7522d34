package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/wire"
)

// LevelTrace is the level below debug, for per-request detail.
const LevelTrace = wire.LevelTrace

// Keys under which a log line carries the ids of the span in its context.
const (
	TraceIDKey = "trace_id"
	SpanIDKey  = "span_id"
)

// ParseLevel maps trace, debug, info, warn and error (any case) to a
// level. The empty string means info.
func ParseLevel(s string) (slog.Level, error) {
	l, err := wire.ParseLevel(s)
	if err != nil {
		return 0, fmt.Errorf("telemetry: %w", err)
	}
	return l, nil
}

// LevelName is the name a level is written with: TRACE, DEBUG, INFO, WARN,
// ERROR, or slog's "INFO+2" style for levels in between.
func LevelName(l slog.Level) string {
	if l <= LevelTrace {
		if l == LevelTrace {
			return "TRACE"
		}
		return fmt.Sprintf("TRACE%d", l-LevelTrace)
	}
	return l.String()
}

// NewLogger returns a JSON logger writing to w at the named level (see
// ParseLevel), the LevelVar that changes that level at run time, and an
// error for an unknown level name. Records pass through a Handler: secrets
// are redacted, the context's trace and span ids are added, and a LogFeed
// (see LogFeedOf) keeps the recent records for log tailing.
func NewLogger(w io.Writer, level string) (*slog.Logger, *slog.LevelVar, error) {
	l, err := ParseLevel(level)
	if err != nil {
		return nil, nil, err
	}
	lv := new(slog.LevelVar)
	lv.Set(l)
	inner := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lv, ReplaceAttr: replaceLevel})
	return slog.New(NewHandler(inner, NewLogFeed(DefaultFeedSize))), lv, nil
}

func replaceLevel(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.LevelKey {
		if l, ok := a.Value.Any().(slog.Level); ok {
			return slog.String(slog.LevelKey, LevelName(l))
		}
	}
	return a
}

// LogFeedOf returns the LogFeed behind a logger made by NewLogger or on a
// Handler, or nil for any other logger.
func LogFeedOf(l *slog.Logger) *LogFeed {
	if l == nil {
		return nil
	}
	if h, ok := l.Handler().(*Handler); ok {
		return h.feed
	}
	return nil
}

// Handler wraps a slog.Handler. It replaces the values of sensitive
// attributes (see Sensitive) with Redacted, adds trace_id and span_id
// from a valid span in the record's context, and publishes each record to
// a LogFeed.
type Handler struct {
	next slog.Handler
	feed *LogFeed

	// root and ops rebuild next with the trace ids outside any group, for
	// the rare record logged through a grouped logger under a span.
	root slog.Handler
	ops  []func(slog.Handler) slog.Handler

	prefix     string     // group path of the feed keys, "a.b."
	bound      []feedAttr // attributes bound with WithAttrs, for the feed
	hasTraceID bool       // trace_id is already bound at the top level
}

type feedAttr struct{ key, value string }

var _ slog.Handler = (*Handler)(nil)

// NewHandler wraps next; feed may be nil.
func NewHandler(next slog.Handler, feed *LogFeed) *Handler {
	return &Handler{next: next, feed: feed, root: next}
}

// Feed returns the handler's LogFeed, or nil.
func (h *Handler) Feed() *LogFeed { return h.feed }

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	safe := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		safe[i], _ = redact(a)
	}
	c := h.clone()
	c.next = h.next.WithAttrs(safe)
	c.ops = append(c.ops, func(n slog.Handler) slog.Handler { return n.WithAttrs(safe) })
	for _, a := range safe {
		if h.prefix == "" && a.Key == TraceIDKey {
			c.hasTraceID = true
		}
		c.bound = appendFeedAttr(c.bound, h.prefix, a)
	}
	return c
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := h.clone()
	c.next = h.next.WithGroup(name)
	c.ops = append(c.ops, func(n slog.Handler) slog.Handler { return n.WithGroup(name) })
	c.prefix = h.prefix + name + "."
	return c
}

func (h *Handler) clone() *Handler {
	c := *h
	c.ops = h.ops[:len(h.ops):len(h.ops)]
	c.bound = h.bound[:len(h.bound):len(h.bound)]
	return &c
}

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	out := r
	changed := false
	var hasTraceID bool
	r.Attrs(func(a slog.Attr) bool {
		if h.prefix == "" && a.Key == TraceIDKey {
			hasTraceID = true
		}
		if _, c := redact(a); c {
			changed = true
		}
		return true
	})
	if changed {
		out = slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			a, _ = redact(a)
			out.AddAttrs(a)
			return true
		})
	}

	next := h.next
	var traceID, spanID string
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !hasTraceID && !h.hasTraceID {
		traceID, spanID = sc.TraceID().String(), sc.SpanID().String()
		ids := []slog.Attr{slog.String(TraceIDKey, traceID), slog.String(SpanIDKey, spanID)}
		if h.prefix == "" {
			if !changed {
				out = out.Clone()
			}
			out.AddAttrs(ids...)
		} else {
			next = h.root.WithAttrs(ids)
			for _, op := range h.ops {
				next = op(next)
			}
		}
	}

	if h.feed != nil {
		h.feed.publish(h.feedRecord(out, traceID, spanID))
	}
	return next.Handle(ctx, out)
}

func (h *Handler) feedRecord(r slog.Record, traceID, spanID string) LogRecord {
	lr := LogRecord{
		Time:    r.Time,
		Level:   LevelName(r.Level),
		Message: r.Message,
		TraceID: traceID,
		SpanID:  spanID,
	}
	if n := len(h.bound) + r.NumAttrs(); n > 0 {
		lr.Attributes = make(map[string]string, n)
		for _, a := range h.bound {
			lr.Attributes[a.key] = a.value
		}
		r.Attrs(func(a slog.Attr) bool {
			flattenAttr(h.prefix, a, func(k, v string) { lr.Attributes[k] = v })
			return true
		})
	}
	// The ids may also have come as ordinary attributes.
	if lr.TraceID == "" {
		lr.TraceID = lr.Attributes[TraceIDKey]
	}
	if lr.SpanID == "" {
		lr.SpanID = lr.Attributes[SpanIDKey]
	}
	return lr
}

// appendFeedAttr appends a, flattened, to dst.
func appendFeedAttr(dst []feedAttr, prefix string, a slog.Attr) []feedAttr {
	flattenAttr(prefix, a, func(k, v string) { dst = append(dst, feedAttr{key: k, value: v}) })
	return dst
}

// flattenAttr calls emit with the key and string value of a, or of each
// member of a group under a dotted key.
func flattenAttr(prefix string, a slog.Attr, emit func(key, value string)) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, m := range v.Group() {
			flattenAttr(prefix, m, emit)
		}
		return
	}
	if a.Key == "" {
		return
	}
	key := a.Key
	if prefix != "" {
		key = prefix + a.Key
	}
	switch v.Kind() {
	case slog.KindTime:
		emit(key, v.Time().Format(time.RFC3339Nano))
	default:
		emit(key, v.String())
	}
}

// LogRecord is a log line as kept by a LogFeed; its JSON form is the
// local API's (package wire).
type LogRecord = wire.LogRecord

// LogFeed keeps the most recent log records in a bounded ring buffer and
// streams them to subscribers; it is what log tailing reads. Logging never
// waits for a subscriber. Only records at or above the logger's level
// reach the feed.
type LogFeed struct {
	f *feed[LogRecord, LogRecord]
}

// NewLogFeed returns a LogFeed keeping the last size records
// (DefaultFeedSize when size ≤ 0).
func NewLogFeed(size int) *LogFeed {
	return &LogFeed{f: newFeed(size, func(r *LogRecord) time.Time { return r.Time })}
}

func (lf *LogFeed) publish(r LogRecord) { lf.f.publish(r) }

// Subscribe streams the buffered records logged at or after since (all of
// them for a zero since) and then live ones, each only when filter (nil
// means all) accepts it. The channel is closed when ctx ends or Close is
// called. A subscriber that falls more than SubscriberBuffer records
// behind misses records; filter runs while the feed is locked, so it must
// be quick and must neither log nor call the feed.
func (lf *LogFeed) Subscribe(ctx context.Context, filter func(LogRecord) bool, since time.Time) <-chan LogRecord {
	return lf.f.subscribe(ctx, filter, since)
}

// Watch is Subscribe returning the Subscription, which also counts the
// records this subscriber missed.
func (lf *LogFeed) Watch(ctx context.Context, filter func(LogRecord) bool, since time.Time) *Subscription[LogRecord] {
	return lf.f.watch(ctx, filter, since)
}

// Publish adds r to the feed, as a logged record would be, without
// writing it to the logger's output. It is how records that only live
// subscribers see (one per decision) enter the feed.
func (lf *LogFeed) Publish(r LogRecord) { lf.f.publish(r) }

// Watched reports whether the feed has a live subscriber; it is one
// atomic load.
func (lf *LogFeed) Watched() bool { return lf.f.live.Load() > 0 }

// Recent returns the buffered records, oldest first, logged at or after
// since and accepted by filter (nil means all).
func (lf *LogFeed) Recent(filter func(LogRecord) bool, since time.Time) []LogRecord {
	return lf.f.recent(filter, since)
}

// Close ends every subscription. Records logged afterwards are still kept.
func (lf *LogFeed) Close() { lf.f.close() }

// Stats returns the feed's counters.
func (lf *LogFeed) Stats() FeedStats { return lf.f.stats() }
