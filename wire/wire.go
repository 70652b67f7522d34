// Package wire holds the JSON shapes of the sidecar's local HTTP API
// that programs other than the sidecar read: the status document, the
// records of the live streams, dry-run reports, the error envelope every
// endpoint refuses with, the deny body of a refused request, and the rule
// by which the session cookie the SAML gateway sets is read. The
// sidecar writes them and the core CLI reads them with the same Go types;
// the Python and TypeScript SDK tests read the golden files in testdata/
// so that a field renamed on one side fails the others.
//
// It is a leaf package (the standard library, and the module's JSON
// string escaper internal/jsonstr), so that the sidecar, the edges that
// answer for it (envoy, samlgw) and its clients share the contract
// without any of them linking another.
package wire

// Paths of the local HTTP API that the CLI and the SDKs call.
const (
	PathHealthz      = "/healthz"
	PathReadyz       = "/readyz"
	PathMetrics      = "/metrics"
	PathStatus       = "/v1/status"
	PathConfig       = "/v1/config"
	PathReloadPolicy = "/v1/policy/reload"
	PathRestart      = "/v1/restart"

	PathSpans     = "/v1/streams/spans"
	PathLogs      = "/v1/streams/logs"
	PathDecisions = "/v1/streams/decisions"

	PathDryRunSessions = "/v1/dry-run/sessions"
)

// Query parameters of the stream endpoints.
const (
	ParamSince      = "since"       // a duration ("5m") back from now, or an RFC 3339 time
	ParamTenant     = "tenant"      // tenant id (case-sensitive)
	ParamService    = "service"     // service.name of spans
	ParamTraceID    = "trace_id"    // hex trace id
	ParamErrorsOnly = "errors_only" // true: failing traces, denied decisions, error logs
	ParamLevel      = "level"       // minimum log level: trace, debug, info, warn, error
	ParamFilter     = "filter"      // field filter expression (package filter)
	ParamFormat     = "format"      // ndjson (default) or sse
)
