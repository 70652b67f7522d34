// Package audit writes the decision audit log: one JSON line per
// authorization decision, simulated (dry-run) decisions included.
//
// A Logger never blocks the decision that produced a record. Records go
// into a bounded queue drained by a single writer goroutine; when the queue
// is full the record is dropped and counted, and the counts are available
// from Stats for status reports and metrics.
//
// The record carries who asked (tenant, user id), what was asked (action,
// resource), what was decided (allow, deny reasons, reason code, policy
// revision) and how to correlate it (decision id, trace id, span id). It
// never carries the bearer token or any claim beyond the subject and tenant.
package audit

import (
	"time"
)

// Sources of a decision, the surface through which it was asked.
const (
	SourceEnvoy  = "envoy"
	SourceGRPC   = "grpc"
	SourceHTTP   = "http"
	SourceSDK    = "sdk"
	SourceDryRun = "dry-run"
)

// Record is one audit log entry. Its JSON form, written by AppendJSON and
// MarshalJSON, has the keys in this order:
//
//	time, decision_id, trace_id, span_id, tenant, user_id, action, resource,
//	allow, deny_reasons, reason, policy_revision, latency_us, simulated, source,
//	identity_kind, plan
//
// span_id, source, identity_kind and plan are omitted when empty; every other key is always
// present. deny_reasons is always an array, never null.
type Record struct {
	// Time is when the decision was asked for; written as RFC 3339 with
	// nanoseconds, in UTC. Logger.Log fills a zero Time with the current time.
	Time time.Time `json:"time"`
	// DecisionID identifies the decision in logs, traces and API responses.
	DecisionID string `json:"decision_id"`
	// TraceID is the hex W3C trace id of the request, empty without a trace.
	TraceID string `json:"trace_id"`
	// SpanID is the hex span id the decision was made under, when known.
	SpanID string `json:"span_id,omitempty"`
	// Tenant is the tenant of the caller (the token's tenant_id claim).
	Tenant string `json:"tenant"`
	// UserID is the caller's subject (the token's sub claim).
	UserID string `json:"user_id"`
	// Action is the requested action, "<resource>:<verb>".
	Action string `json:"action"`
	// Resource is what the action applies to.
	Resource Resource `json:"resource"`
	// Allow is the final outcome: token accepted and policy allowed.
	Allow bool `json:"allow"`
	// DenyReasons are the policy's deny reasons, sorted; written as [] when
	// empty. Log keeps a reference to the slice, so callers must not modify
	// it afterwards.
	DenyReasons []string `json:"deny_reasons"`
	// Reason is the stable reason code of the decision ("policy-allow",
	// "token-expired", ...).
	Reason string `json:"reason"`
	// PolicyRevision is the revision of the policy set that decided.
	PolicyRevision string `json:"policy_revision"`
	// LatencyUS is the time taken to decide, in microseconds.
	LatencyUS int64 `json:"latency_us"`
	// Simulated is true for dry-run decisions that were not enforced.
	Simulated bool `json:"simulated"`
	// Source is the surface the decision was asked through: one of the
	// Source constants, or empty when unknown.
	Source string `json:"source,omitempty"`
	// IdentityKind is the kind of credential the caller proved itself
	// with ("jwt", "introspection", "api_key", "mtls", "session"); empty
	// when no credential was accepted.
	IdentityKind string `json:"identity_kind,omitempty"`
	// Plan is the kind of a resource plan ("always_allowed",
	// "always_denied", "conditional") when the record is of a plan
	// (PlanResources) rather than of a decision on one resource; then
	// Allow is true only for "always_allowed".
	Plan string `json:"plan,omitempty"`
}

// Resource is the target of an action. It is written as an object with all
// three keys present, empty strings standing for unknown parts, so that log
// pipelines see one fixed shape; attributes follow only when there are
// some.
type Resource struct {
	// Type is the resource kind, the action's prefix ("orders").
	Type string `json:"type"`
	// ID identifies the resource, when known.
	ID string `json:"id"`
	// Tenant owns the resource.
	Tenant string `json:"tenant"`
	// Attributes are the attributes the caller sent with the resource
	// (input.resource.attributes), written as encoding/json writes them.
	Attributes map[string]any `json:"attributes,omitempty"`
}

// MarshalJSON returns the record as AppendJSON writes it, without the
// trailing newline.
func (r Record) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(make([]byte, 0, 384)), nil
}
