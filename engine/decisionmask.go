package engine

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/decisionlog"
	"github.com/svc-dev/svc/internal/jsonmask"
	"go.opentelemetry.io/otel/trace"
)

// openDecisionMask parses decision_log.mask, which validation has
// checked already.
func (e *Engine) openDecisionMask() error {
	m, err := jsonmask.Parse(e.cfg.DecisionLog.Mask)
	if err != nil {
		return &SettingError{Key: "decision_log.mask", Origin: e.cfg.Origin("decision_log.mask"), Msg: err.Error(), Err: err}
	}
	e.decisionMask = m
	return nil
}

// decisionRecord is the JSON of the decision record of rec: the audit
// record's object with the redacted input as its last member, "input"
// (unless decision_log.include_input is false), then decision_log.mask
// applied. Credentials are redacted before the mask runs, so that no
// mask can bring them back. Without a mask the record is not parsed
// again.
func (e *Engine) decisionRecord(rec *audit.Record, in *Input) ([]byte, error) {
	return e.maskRecord(e.appendDecisionRecord(make([]byte, 0, 1024), rec, in, nil, trace.SpanContext{}))
}

// appendDecisionRecord appends the decision record of rec, unmasked, to
// dst; src, when not nil, holds the headers and query that in's request
// does not have yet, and sc, when valid, the trace and span ids of a
// record without them, written from their bytes.
func (e *Engine) appendDecisionRecord(dst []byte, rec *audit.Record, in *Input, src RequestSource, sc trace.SpanContext) []byte {
	b := appendAuditRecord(dst, rec, sc)
	if e.cfg.DecisionLog.IncludesInput() {
		b = append(b[:len(b)-1], `,"input":`...)
		b = appendRedactedInput(b, in, src)
		b = append(b, '}')
	}
	return b
}

// InputOmitted is the member a decision record holds instead of "input"
// when the record with its input is larger than the decision log's
// spool takes; its value says why ("too-large").
const InputOmitted = decisionlog.InputOmitted

// appendOversizedRecord appends the decision record of rec without its
// input, which made the record larger than the spool takes, and with
// InputOmitted in its place: the decision is logged, by its audit
// fields, rather than refused for the size of what the caller sent.
// core policy replay skips such a record as one without input.
func (e *Engine) appendOversizedRecord(dst []byte, rec *audit.Record, sc trace.SpanContext) []byte {
	b := appendAuditRecord(dst, rec, sc)
	return append(b[:len(b)-1], `,"`+InputOmitted+`":"too-large"}`...)
}

// Truncated is the member, true, of a decision record whose audit
// fields were clipped: even without its input the record was larger than
// the decision log takes (a resource id or an action of megabytes).
const Truncated = "truncated"

// A truncated record keeps at most maxClippedReasons deny reasons and
// maxClippedBytes of each string, and no resource attributes.
const (
	maxClippedBytes   = 1 << 10
	maxClippedReasons = 16
)

// appendTruncatedRecord appends the decision record of rec with each of
// its strings cut to maxClippedBytes, its deny reasons to
// maxClippedReasons and without resource attributes, Truncated saying
// so (and InputOmitted when omitted, its input): the last resort before
// refusing a decision for the size of what the caller sent.
func (e *Engine) appendTruncatedRecord(dst []byte, rec *audit.Record, sc trace.SpanContext, omitted bool) []byte {
	c := *rec
	for _, s := range []*string{&c.DecisionID, &c.TraceID, &c.SpanID, &c.Tenant, &c.UserID, &c.Action, &c.Reason,
		&c.PolicyRevision, &c.Source, &c.IdentityKind, &c.Plan, &c.Resource.Type, &c.Resource.ID, &c.Resource.Tenant} {
		*s = clipString(*s)
	}
	c.Resource.Attributes = nil
	c.DenyReasons = make([]string, 0, min(len(rec.DenyReasons), maxClippedReasons))
	for _, r := range rec.DenyReasons[:min(len(rec.DenyReasons), maxClippedReasons)] {
		c.DenyReasons = append(c.DenyReasons, clipString(r))
	}
	b := appendAuditRecord(dst, &c, sc)
	b = b[:len(b)-1]
	if omitted {
		b = append(b, `,"`+InputOmitted+`":"too-large"`...)
	}
	return append(b, `,"`+Truncated+`":true}`...)
}

// clipString is s cut to at most maxClippedBytes, at a character's start.
func clipString(s string) string {
	if len(s) <= maxClippedBytes {
		return s
	}
	i := maxClippedBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// appendAuditRecord appends the audit record rec, with the trace and
// span ids of sc when it is valid and rec has none.
func appendAuditRecord(dst []byte, rec *audit.Record, sc trace.SpanContext) []byte {
	if sc.IsValid() {
		return rec.AppendJSONTraced(dst, sc.TraceID(), sc.SpanID())
	}
	return rec.AppendJSON(dst)
}

// maskRecord applies decision_log.mask to the record b: b itself without
// a mask, else a copy.
func (e *Engine) maskRecord(b []byte) ([]byte, error) {
	if e.decisionMask.Empty() {
		return b, nil
	}
	masked, _, err := e.decisionMask.Apply(b)
	return masked, err
}

// maskedRecord is rec with decision_log.mask applied, as the audit log
// writes it, for what observers show: the live decision and log streams
// (core log tail). An erased member is its zero value. Observers that
// evaluate (dry-run sessions) read the event's Input, which the mask
// leaves alone.
func (e *Engine) maskedRecord(rec audit.Record) audit.Record {
	if e.decisionMask.Empty() {
		return rec
	}
	masked, err := e.maskRecord(rec.AppendJSON(nil))
	var out audit.Record
	if err != nil || json.Unmarshal(masked, &out) != nil {
		// A record the mask cannot be applied to is not shown at all
		// beyond what identifies it.
		return audit.Record{Time: rec.Time, DecisionID: rec.DecisionID, Reason: rec.Reason, Allow: rec.Allow}
	}
	return out
}
