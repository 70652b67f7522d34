package live

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/sidecar/telemetry"
	"github.com/svc-dev/svc/wire"
	"github.com/svc-dev/svc/wire/filter"
)

// maxSince bounds how far back a replay may ask; the ring buffers hold
// far less than that anyway.
const maxSince = 24 * time.Hour

// Query is a parsed stream request.
type Query struct {
	// Since is the start of the replay; without the since parameter it
	// is now: live records only.
	Since      time.Time
	Tenant     string
	Service    string
	TraceID    string
	ErrorsOnly bool
	Level      slog.Level
	HasLevel   bool
	Filter     *filter.Expr
	SSE        bool
}

// QueryError is a stream request that cannot be served; Code is
// "input-invalid", or "filter-invalid" for a malformed filter.
type QueryError struct {
	Code string
	Msg  string
}

func (e *QueryError) Error() string { return e.Msg }

// ParseQuery reads the stream parameters of q; allowed names the ones the
// endpoint accepts (format always is). accept is the request's Accept
// header: text/event-stream selects Server-Sent Events.
func ParseQuery(q url.Values, accept string, now time.Time, allowed ...string) (Query, error) {
	var out Query
	for name := range q {
		if name != wire.ParamFormat && !contains(allowed, name) {
			return out, &QueryError{Code: string(reason.InputInvalid), Msg: fmt.Sprintf("unknown parameter %q: this stream takes %s", name, strings.Join(allowed, ", "))}
		}
	}
	bad := func(name, format string, args ...any) error {
		return &QueryError{Code: string(reason.InputInvalid), Msg: name + ": " + fmt.Sprintf(format, args...)}
	}
	out.Since = now
	if v := q.Get(wire.ParamSince); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			if d < 0 || d > maxSince {
				return out, bad(wire.ParamSince, "must be between 0 and %s, got %s", maxSince, v)
			}
			out.Since = now.Add(-d)
		} else if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			out.Since = t
		} else {
			return out, bad(wire.ParamSince, "want a duration such as 5m or an RFC 3339 time, got %q", v)
		}
	}
	out.Tenant = q.Get(wire.ParamTenant)
	out.Service = q.Get(wire.ParamService)
	out.TraceID = strings.ToLower(q.Get(wire.ParamTraceID))
	if v := out.TraceID; v != "" && !isHex(v, 32) {
		return out, bad(wire.ParamTraceID, "want 32 hex digits, got %q", v)
	}
	if v := q.Get(wire.ParamErrorsOnly); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return out, bad(wire.ParamErrorsOnly, "want true or false, got %q", v)
		}
		out.ErrorsOnly = b
	}
	if v := q.Get(wire.ParamLevel); v != "" {
		l, err := telemetry.ParseLevel(v)
		if err != nil {
			return out, bad(wire.ParamLevel, "want trace, debug, info, warn or error, got %q", v)
		}
		out.Level, out.HasLevel = l, true
	}
	if v := q.Get(wire.ParamFilter); v != "" {
		e, err := filter.Parse(v)
		if err != nil {
			var se *filter.SyntaxError
			if errors.As(err, &se) {
				return out, &QueryError{Code: string(reason.FilterInvalid), Msg: se.Error()}
			}
			return out, bad(wire.ParamFilter, "%v", err)
		}
		out.Filter = e
	}
	switch q.Get(wire.ParamFormat) {
	case "", "ndjson":
		out.SSE = q.Get(wire.ParamFormat) == "" && strings.Contains(accept, "text/event-stream")
	case "sse":
		out.SSE = true
	default:
		return out, bad(wire.ParamFormat, "want ndjson or sse, got %q", q.Get(wire.ParamFormat))
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
