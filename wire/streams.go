package wire

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// LevelTrace is the level below debug that the sidecar's own tracing
// detail logs at.
const LevelTrace = slog.Level(-8)

// LogRecord is a log line as GET /v1/streams/logs streams it (one per
// NDJSON line, or the data of an SSE event "log").
type LogRecord struct {
	// Time is when the record was logged.
	Time time.Time `json:"time"`
	// Level is the level name: TRACE, DEBUG, INFO, WARN, ERROR, or
	// slog's "INFO+2" form for levels in between.
	Level string `json:"level"`
	// Message is the log message.
	Message string `json:"msg"`
	// TraceID is the hex trace id of the context's span, when there is one.
	TraceID string `json:"trace_id,omitempty"`
	// SpanID is the hex id of the context's span, when there is one.
	SpanID string `json:"span_id,omitempty"`
	// Attributes are the record's attributes after redaction, group
	// members under dotted keys ("request.method"), values in string form.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// SpanRecord is the compact form of a finished span as GET
// /v1/streams/spans streams it (SSE event "span").
type SpanRecord struct {
	// TraceID is the hex trace id.
	TraceID string `json:"trace_id"`
	// SpanID is the hex span id.
	SpanID string `json:"span_id"`
	// ParentID is the hex id of the parent span, empty for a root span.
	ParentID string `json:"parent_id,omitempty"`
	// Name is the span name, e.g. "policy.evaluate".
	Name string `json:"name"`
	// Service is the service.name of the process that recorded the span.
	Service string `json:"service,omitempty"`
	// Kind is "internal", "server", "client", "producer" or "consumer".
	Kind string `json:"kind"`
	// Start is when the span started.
	Start time.Time `json:"start"`
	// Duration is how long the span lasted.
	Duration time.Duration `json:"duration_ns"`
	// Status is "unset", "ok" or "error".
	Status string `json:"status"`
	// StatusMessage describes an error status.
	StatusMessage string `json:"status_message,omitempty"`
	// Attributes are the span's attributes, each value in its string form.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// End returns when the span ended.
func (r SpanRecord) End() time.Time { return r.Start.Add(r.Duration) }

// DroppedType is the type of a DroppedNotice.
const DroppedType = "dropped"

// DroppedNotice is the stream line {"dropped":n,"type":"dropped"} (SSE
// event "dropped") telling a watcher that n records were dropped for it
// because it fell behind.
type DroppedNotice struct {
	Dropped uint64 `json:"dropped"`
	Type    string `json:"type"`
}

// ParseDropped reads a stream line as a DroppedNotice; ok is false for
// any other line.
func ParseDropped(line []byte) (n uint64, ok bool) {
	var d DroppedNotice
	if json.Unmarshal(line, &d) != nil || d.Type != DroppedType {
		return 0, false
	}
	return d.Dropped, true
}

// ParseLevel maps trace, debug, info, warn and error (any case) to a
// level. The empty string means info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "trace":
		return LevelTrace, nil
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q: want trace, debug, info, warn or error", s)
}

// LevelOf parses a record's level name (TRACE, DEBUG, INFO, WARN, ERROR,
// or slog's "INFO+2" form); an unknown name is info.
func LevelOf(name string) slog.Level {
	if l, err := ParseLevel(name); err == nil {
		return l
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(name)); err == nil {
		return l
	}
	if strings.HasPrefix(strings.ToUpper(name), "TRACE") {
		return LevelTrace
	}
	return slog.LevelInfo
}
