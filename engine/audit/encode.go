package audit

import (
	"encoding/hex"
	"strconv"
	"time"

	"github.com/svc-dev/svc/internal/jsonstr"
)

// AppendJSON appends the JSON object of r to b, without a newline, and
// returns the extended slice. It allocates nothing when b has room: the
// writer goroutine reuses one buffer for every record, which is why the
// encoder is written by hand rather than through encoding/json. Only a
// resource's attributes, of any shape, go through encoding/json.
//
// Strings are escaped byte for byte as encoding/json escapes them with
// HTML escaping off: quotes, backslashes, control characters and
// U+2028/U+2029 are escaped, and each invalid UTF-8 byte becomes U+FFFD.
func (r *Record) AppendJSON(b []byte) []byte {
	return r.appendJSON(b, &rawIDs{})
}

// AppendJSONTraced is AppendJSON of r with TraceID and SpanID the W3C
// ids trace and span, written as hex from their bytes unless r's own
// fields are set (as Logger.LogTraced writes them).
func (r *Record) AppendJSONTraced(b []byte, trace [16]byte, span [8]byte) []byte {
	return r.appendJSON(b, &rawIDs{trace: trace, span: span, set: true})
}

// rawIDs are a record's trace and span ids as bytes (Logger.LogTraced).
type rawIDs struct {
	trace [16]byte
	span  [8]byte
	set   bool
}

// appendJSON is AppendJSON writing ids, when set, in place of an empty
// TraceID and SpanID.
func (r *Record) appendJSON(b []byte, ids *rawIDs) []byte {
	b = append(b, `{"time":"`...)
	b = r.Time.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","decision_id":`...)
	b = appendString(b, r.DecisionID)
	b = append(b, `,"trace_id":`...)
	if r.TraceID == "" && ids.set {
		b = appendHex(b, ids.trace[:])
	} else {
		b = appendString(b, r.TraceID)
	}
	if r.SpanID != "" {
		b = append(b, `,"span_id":`...)
		b = appendString(b, r.SpanID)
	} else if ids.set {
		b = append(b, `,"span_id":`...)
		b = appendHex(b, ids.span[:])
	}
	b = append(b, `,"tenant":`...)
	b = appendString(b, r.Tenant)
	b = append(b, `,"user_id":`...)
	b = appendString(b, r.UserID)
	b = append(b, `,"action":`...)
	b = appendString(b, r.Action)
	b = append(b, `,"resource":{"type":`...)
	b = appendString(b, r.Resource.Type)
	b = append(b, `,"id":`...)
	b = appendString(b, r.Resource.ID)
	b = append(b, `,"tenant":`...)
	b = appendString(b, r.Resource.Tenant)
	if len(r.Resource.Attributes) > 0 {
		// Through encoding/json, which allocates: only for records that
		// carry attributes. Left out when they are not JSON.
		n := len(b)
		b = append(b, `,"attributes":`...)
		var ok bool
		if b, ok = jsonstr.AppendValue(b, r.Resource.Attributes, false); !ok {
			b = b[:n]
		}
	}
	b = append(b, `},"allow":`...)
	b = strconv.AppendBool(b, r.Allow)
	b = append(b, `,"deny_reasons":[`...)
	for i, s := range r.DenyReasons {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	b = append(b, `],"reason":`...)
	b = appendString(b, r.Reason)
	b = append(b, `,"policy_revision":`...)
	b = appendString(b, r.PolicyRevision)
	b = append(b, `,"latency_us":`...)
	b = strconv.AppendInt(b, r.LatencyUS, 10)
	b = append(b, `,"simulated":`...)
	b = strconv.AppendBool(b, r.Simulated)
	if r.Source != "" {
		b = append(b, `,"source":`...)
		b = appendString(b, r.Source)
	}
	if r.IdentityKind != "" {
		b = append(b, `,"identity_kind":`...)
		b = appendString(b, r.IdentityKind)
	}
	if r.Plan != "" {
		b = append(b, `,"plan":`...)
		b = appendString(b, r.Plan)
	}
	return append(b, '}')
}

// appendHex appends id as a quoted string of lower-case hex digits.
func appendHex(b []byte, id []byte) []byte {
	b = append(b, '"')
	b = hex.AppendEncode(b, id)
	return append(b, '"')
}

// appendString appends s as a quoted JSON string, as encoding/json
// writes it without HTML escaping.
func appendString(b []byte, s string) []byte { return jsonstr.Append(b, s, false) }
