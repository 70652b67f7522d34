// Package localapi is the former home of the JSON shapes of the sidecar's
// local HTTP API. Its names are aliases of package
// github.com/svc-dev/svc/wire, where the shapes are defined.
//
// Deprecated: use github.com/svc-dev/svc/wire. This package will be
// removed in the next release.
package localapi

import (
	"log/slog"
	"net/http"

	"github.com/svc-dev/svc/wire"
)

// Paths of the local HTTP API.
const (
	PathHealthz        = wire.PathHealthz
	PathReadyz         = wire.PathReadyz
	PathMetrics        = wire.PathMetrics
	PathStatus         = wire.PathStatus
	PathConfig         = wire.PathConfig
	PathReloadPolicy   = wire.PathReloadPolicy
	PathRestart        = wire.PathRestart
	PathSpans          = wire.PathSpans
	PathLogs           = wire.PathLogs
	PathDecisions      = wire.PathDecisions
	PathDryRunSessions = wire.PathDryRunSessions
)

// Query parameters of the stream endpoints.
const (
	ParamSince      = wire.ParamSince
	ParamTenant     = wire.ParamTenant
	ParamService    = wire.ParamService
	ParamTraceID    = wire.ParamTraceID
	ParamErrorsOnly = wire.ParamErrorsOnly
	ParamLevel      = wire.ParamLevel
	ParamFilter     = wire.ParamFilter
	ParamFormat     = wire.ParamFormat
)

// Values of Status.Status.
const (
	StatusHealthy     = wire.StatusHealthy
	StatusDegraded    = wire.StatusDegraded
	StatusUnavailable = wire.StatusUnavailable
	StatusDraining    = wire.StatusDraining
)

// Limits and states of a dry-run session.
const (
	DryRunDefaultQueueSize = wire.DryRunDefaultQueueSize
	DryRunMaxQueueSize     = wire.DryRunMaxQueueSize
	DryRunMaxDuration      = wire.DryRunMaxDuration
	DryRunRunning          = wire.DryRunRunning
	DryRunFinished         = wire.DryRunFinished
)

// Other constants of the wire contract.
const (
	DroppedType      = wire.DroppedType
	HostCookiePrefix = wire.HostCookiePrefix
	LevelTrace       = wire.LevelTrace
	Compact          = wire.Compact
	Indented         = wire.Indented
)

// The shapes.
type (
	AuditStats         = wire.AuditStats
	BundleStatus       = wire.BundleStatus
	Change             = wire.Change
	DenyBody           = wire.DenyBody
	DroppedNotice      = wire.DroppedNotice
	DryRunReport       = wire.DryRunReport
	ErrorBody          = wire.ErrorBody
	ErrorDetail        = wire.ErrorDetail
	HandoverRefusal    = wire.HandoverRefusal
	Layout             = wire.Layout
	LogRecord          = wire.LogRecord
	PolicyState        = wire.PolicyState
	RateLimitStatus    = wire.RateLimitStatus
	ReasonCount        = wire.ReasonCount
	SAMLMetadataStatus = wire.SAMLMetadataStatus
	SAMLStatus         = wire.SAMLStatus
	SpanRecord         = wire.SpanRecord
	Status             = wire.Status
)

// LevelOf is wire.LevelOf.
func LevelOf(name string) slog.Level { return wire.LevelOf(name) }

// ParseDropped is wire.ParseDropped.
func ParseDropped(line []byte) (n uint64, ok bool) { return wire.ParseDropped(line) }

// ParseLevel is wire.ParseLevel.
func ParseLevel(s string) (slog.Level, error) { return wire.ParseLevel(s) }

// SessionCookie is wire.SessionCookie.
func SessionCookie(r *http.Request, name string) (string, bool) { return wire.SessionCookie(r, name) }

// WriteError is wire.WriteError.
func WriteError(w http.ResponseWriter, status int, layout Layout, code, msg string) {
	wire.WriteError(w, status, layout, code, msg)
}

// WriteJSON is wire.WriteJSON.
func WriteJSON(w http.ResponseWriter, status int, layout Layout, v any) {
	wire.WriteJSON(w, status, layout, v)
}

// WriteRaw is wire.WriteRaw.
func WriteRaw(w http.ResponseWriter, status int, b []byte) { wire.WriteRaw(w, status, b) }
