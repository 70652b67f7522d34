// Package live serves the sidecar's live traffic to watchers: streams of
// spans, log records and decisions over HTTP (NDJSON or Server-Sent
// Events), with server-side filters and a replay of the recent past from
// the telemetry ring buffers.
//
// A Hub is the engine's DecisionObserver. While nobody watches (no
// subscriber and no dry-run session), the engine's only cost for it is
// Observing, a few atomic loads. While somebody does, every decision is
// published to the decision feed and, as one log record, to the log feed,
// whatever the logger's own level; each subscriber reads through a bounded
// queue that drops, and counts, what it cannot keep up with, so that a
// slow watcher never slows a decision.
package live

import (
	"context"
	"log/slog"
	"strconv"
	"strings"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

// Message of the log record every watched decision produces.
const DecisionMessage = "decision"

// Values of the policy.result field of decision log records.
const (
	ResultAllowed = "allowed"
	ResultDenied  = "denied"
)

// Session is what the Hub hands watched decisions to besides the feeds:
// the dry-run sessions. Active must cost no more than an atomic load.
type Session interface {
	Active() bool
	Observe(ev engine.DecisionEvent)
}

// Hub fans decisions out to the live feeds and dry-run sessions.
type Hub struct {
	spans     *telemetry.SpanFeed
	logs      *telemetry.LogFeed
	decisions *telemetry.DecisionFeed
	sessions  Session
	log       *slog.Logger
}

// Deps are the feeds a Hub serves. Spans and Logs may be nil (no span or
// log stream); Sessions may be nil (no dry-run).
type Deps struct {
	Spans    *telemetry.SpanFeed
	Logs     *telemetry.LogFeed
	Sessions Session
	Logger   *slog.Logger
}

// NewHub returns a Hub with its own decision feed.
func NewHub(deps Deps) *Hub {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	return &Hub{
		spans:     deps.Spans,
		logs:      deps.Logs,
		decisions: telemetry.NewDecisionFeed(telemetry.DefaultFeedSize),
		sessions:  deps.Sessions,
		log:       deps.Logger,
	}
}

var _ engine.DecisionObserver = (*Hub)(nil)

// Decisions is the hub's decision feed.
func (h *Hub) Decisions() *telemetry.DecisionFeed { return h.decisions }

// Observing implements engine.DecisionObserver.
// A span watcher counts: the engine then puts the redacted policy input
// on policy.evaluate spans for the variable inspector of trace tail.
func (h *Hub) Observing() bool {
	return h.decisions.Watched() || (h.logs != nil && h.logs.Watched()) ||
		(h.spans != nil && h.spans.Watched()) || (h.sessions != nil && h.sessions.Active())
}

// ObserveDecision implements engine.DecisionObserver.
func (h *Hub) ObserveDecision(_ context.Context, ev engine.DecisionEvent) {
	if h.decisions.Watched() {
		h.decisions.Publish(ev.Record)
	}
	if h.logs != nil && h.logs.Watched() {
		h.logs.Publish(DecisionLogRecord(ev.Record))
	}
	if h.sessions != nil && h.sessions.Active() {
		h.sessions.Observe(ev)
	}
}

// Close ends every decision subscription.
func (h *Hub) Close() { h.decisions.Close() }

// DecisionLogRecord is the log record of a decision: message "decision",
// level INFO when allowed, WARN when denied, ERROR when no decision could
// be made; its fields are those of the audit record, with policy.result
// "allowed" or "denied" and deny_reasons joined by commas.
func DecisionLogRecord(r audit.Record) telemetry.LogRecord {
	return telemetry.LogRecord{
		Time:    r.Time,
		Level:   decisionLevel(r),
		Message: DecisionMessage,
		TraceID: r.TraceID,
		SpanID:  r.SpanID,
		Attributes: map[string]string{
			"decision_id":     r.DecisionID,
			"tenant":          r.Tenant,
			"user_id":         r.UserID,
			"action":          r.Action,
			"resource.type":   r.Resource.Type,
			"resource.id":     r.Resource.ID,
			"resource.tenant": r.Resource.Tenant,
			"policy.result":   policyResult(r),
			"reason":          r.Reason,
			"deny_reasons":    strings.Join(r.DenyReasons, ","),
			"policy_revision": r.PolicyRevision,
			"latency_us":      strconv.FormatInt(r.LatencyUS, 10),
			"simulated":       strconv.FormatBool(r.Simulated),
			"source":          r.Source,
		},
	}
}

func policyResult(r audit.Record) string {
	if r.Allow {
		return ResultAllowed
	}
	return ResultDenied
}

func decisionLevel(r audit.Record) string {
	switch {
	case r.Reason == string(reason.PolicyError) || r.Reason == string(reason.Unavailable) || reason.Unjudged(reason.Code(r.Reason)):
		return "ERROR"
	case !r.Allow:
		return "WARN"
	}
	return "INFO"
}

// decisionField is the filter getter of a decision record: the fields of
// its log record, plus level.
func decisionField(r audit.Record) func(string) (string, bool) {
	return func(f string) (string, bool) {
		switch f {
		case "level":
			return decisionLevel(r), true
		case "trace_id":
			return r.TraceID, r.TraceID != ""
		case "span_id":
			return r.SpanID, r.SpanID != ""
		case "msg":
			return DecisionMessage, true
		case "policy.result":
			return policyResult(r), true
		case "decision_id":
			return r.DecisionID, true
		case "tenant":
			return r.Tenant, true
		case "user_id":
			return r.UserID, true
		case "action":
			return r.Action, true
		case "reason":
			return r.Reason, true
		case "source":
			return r.Source, true
		case "simulated":
			return strconv.FormatBool(r.Simulated), true
		case "policy_revision":
			return r.PolicyRevision, true
		case "resource.type":
			return r.Resource.Type, true
		case "resource.id":
			return r.Resource.ID, true
		case "resource.tenant":
			return r.Resource.Tenant, true
		case "deny_reasons":
			return strings.Join(r.DenyReasons, ","), true
		}
		return "", false
	}
}

// logField is the filter getter of a log record.
func logField(r telemetry.LogRecord) func(string) (string, bool) {
	return func(f string) (string, bool) {
		switch f {
		case "level":
			return r.Level, true
		case "msg", "message":
			return r.Message, true
		case "trace_id":
			return r.TraceID, r.TraceID != ""
		case "span_id":
			return r.SpanID, r.SpanID != ""
		}
		v, ok := r.Attributes[f]
		return v, ok
	}
}
