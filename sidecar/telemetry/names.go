package telemetry

import (
	"io"
	"log/slog"

	"github.com/svc-dev/svc/engine/telemetry"
)

// Names of package engine/telemetry, documented there.
const (
	DefaultServiceName = telemetry.DefaultServiceName
	DefaultFeedSize    = telemetry.DefaultFeedSize
	SubscriberBuffer   = telemetry.SubscriberBuffer
	LevelTrace         = telemetry.LevelTrace
	Redacted           = telemetry.Redacted
	TraceIDKey         = telemetry.TraceIDKey
	SpanIDKey          = telemetry.SpanIDKey
	EnvEndpoint        = telemetry.EnvEndpoint
	EnvTracesEndpoint  = telemetry.EnvTracesEndpoint
	EnvMetricsEndpoint = telemetry.EnvMetricsEndpoint
	EnvInsecure        = telemetry.EnvInsecure
	EnvSDKDisabled     = telemetry.EnvSDKDisabled
)

// Types of package engine/telemetry, documented there.
type (
	Options             = telemetry.Options
	DecisionFeed        = telemetry.DecisionFeed
	FeedStats           = telemetry.FeedStats
	Handler             = telemetry.Handler
	LogFeed             = telemetry.LogFeed
	LogRecord           = telemetry.LogRecord
	SpanFeed            = telemetry.SpanFeed
	SpanRecord          = telemetry.SpanRecord
	Subscription[T any] = telemetry.Subscription[T]
)

// NewLogger is engine/telemetry's NewLogger.
func NewLogger(w io.Writer, level string) (*slog.Logger, *slog.LevelVar, error) {
	return telemetry.NewLogger(w, level)
}

// ParseLevel is engine/telemetry's ParseLevel.
func ParseLevel(s string) (slog.Level, error) { return telemetry.ParseLevel(s) }

// LevelName is engine/telemetry's LevelName.
func LevelName(l slog.Level) string { return telemetry.LevelName(l) }

// Sensitive is engine/telemetry's Sensitive.
func Sensitive(key string) bool { return telemetry.Sensitive(key) }

// LogFeedOf is engine/telemetry's LogFeedOf.
func LogFeedOf(l *slog.Logger) *LogFeed { return telemetry.LogFeedOf(l) }

// NewLogFeed is engine/telemetry's NewLogFeed.
func NewLogFeed(size int) *LogFeed { return telemetry.NewLogFeed(size) }

// NewSpanFeed is engine/telemetry's NewSpanFeed.
func NewSpanFeed(size int) *SpanFeed { return telemetry.NewSpanFeed(size) }

// NewDecisionFeed is engine/telemetry's NewDecisionFeed.
func NewDecisionFeed(size int) *DecisionFeed { return telemetry.NewDecisionFeed(size) }

// NewHandler is engine/telemetry's NewHandler.
func NewHandler(next slog.Handler, feed *LogFeed) *Handler { return telemetry.NewHandler(next, feed) }
