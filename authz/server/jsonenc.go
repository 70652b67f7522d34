package server

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/svc-dev/svc/authz/v1"
)

// maxJSONDepth bounds the nesting of claims appendAuthorizeResponse
// renders itself; deeper ones (which claimsToStruct never makes) take
// protojson's path.
const maxJSONDepth = 100

// appendAuthorizeResponse appends r to b as writeProto renders it through
// protojson (jsonOut: proto field names, unpopulated fields written,
// compacted): the fields in declaration order, claims with their keys
// sorted, numbers and durations formatted and strings escaped as protojson
// does. It walks the message itself instead of through protoreflect,
// which allocates for nearly every field and claim.
//
// ok is false, b then being of no use, when r holds anything protojson
// refuses or this encoder does not render: a string that is not valid
// UTF-8, a number that is not finite, a claim value of no kind or a nil
// one, an invalid duration, claims nested deeper than maxJSONDepth. The
// caller then encodes with protojson, which answers as it always has.
func appendAuthorizeResponse(b []byte, r *authzv1.AuthorizeResponse) (_ []byte, ok bool) {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, r.GetAllowed())
	if b, ok = appendField(b, `,"reason":`, r.GetReason()); !ok {
		return b, false
	}
	b = append(b, `,"deny_reasons":[`...)
	for i, s := range r.GetDenyReasons() {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendJSONString(b, s); !ok {
			return b, false
		}
	}
	b = append(b, ']')
	if b, ok = appendField(b, `,"decision_id":`, r.GetDecisionId()); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"subject":`, r.GetSubject()); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"tenant_id":`, r.GetTenantId()); !ok {
		return b, false
	}
	b = append(b, `,"claims":`...)
	if c := r.GetClaims(); c == nil {
		b = append(b, "null"...)
	} else if b, ok = appendStruct(b, c, 0); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"policy_revision":`, r.GetPolicyRevision()); !ok {
		return b, false
	}
	b = append(b, `,"retry_after":`...)
	if d := r.GetRetryAfter(); d == nil {
		b = append(b, "null"...)
	} else if b, ok = appendDuration(b, d); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"message":`, r.GetMessage()); !ok {
		return b, false
	}
	return append(b, '}'), true
}

func appendField(b []byte, name, value string) ([]byte, bool) {
	return appendJSONString(append(b, name...), value)
}

// appendStruct renders a google.protobuf.Struct: an object, keys sorted.
func appendStruct(b []byte, s *structpb.Struct, depth int) (_ []byte, ok bool) {
	if depth > maxJSONDepth {
		return b, false
	}
	var arr [16]string
	keys := arr[:0]
	for k := range s.GetFields() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendJSONString(b, k); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = appendValue(b, s.GetFields()[k], depth+1); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendValue renders a google.protobuf.Value.
func appendValue(b []byte, v *structpb.Value, depth int) (_ []byte, ok bool) {
	if depth > maxJSONDepth {
		return b, false
	}
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		if k != nil {
			return append(b, "null"...), true
		}
	case *structpb.Value_NumberValue:
		if k != nil && !math.IsNaN(k.NumberValue) && !math.IsInf(k.NumberValue, 0) {
			return appendFloat(b, k.NumberValue), true
		}
	case *structpb.Value_StringValue:
		if k != nil {
			return appendJSONString(b, k.StringValue)
		}
	case *structpb.Value_BoolValue:
		if k != nil {
			return strconv.AppendBool(b, k.BoolValue), true
		}
	case *structpb.Value_StructValue:
		if k != nil && k.StructValue != nil {
			return appendStruct(b, k.StructValue, depth)
		}
	case *structpb.Value_ListValue:
		if k != nil && k.ListValue != nil {
			b = append(b, '[')
			for i, e := range k.ListValue.GetValues() {
				if i > 0 {
					b = append(b, ',')
				}
				if b, ok = appendValue(b, e, depth+1); !ok {
					return b, false
				}
			}
			return append(b, ']'), true
		}
	}
	return b, false
}

// appendFloat formats a finite double as protojson does: the shortest
// representation, in exponent form below 1e-6 and from 1e21, with an
// exponent of one digit not padded ("1e-07" becomes "1e-7").
func appendFloat(b []byte, n float64) []byte {
	format := byte('f')
	if abs := math.Abs(n); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, n, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// Bounds protojson puts on a google.protobuf.Duration.
const (
	maxDurationSeconds = 315576000000
	maxDurationNanos   = 999999999
)

// appendDuration renders a google.protobuf.Duration as protojson does:
// seconds with 0, 3, 6 or 9 fractional digits and "s", as a string.
func appendDuration(b []byte, d *durationpb.Duration) ([]byte, bool) {
	secs, nanos := d.GetSeconds(), int64(d.GetNanos())
	if secs < -maxDurationSeconds || secs > maxDurationSeconds ||
		nanos < -maxDurationNanos || nanos > maxDurationNanos ||
		(secs > 0 && nanos < 0) || (secs < 0 && nanos > 0) {
		return b, false
	}
	b = append(b, '"')
	if secs < 0 || nanos < 0 {
		b = append(b, '-')
		secs, nanos = -secs, -nanos
	}
	b = strconv.AppendInt(b, secs, 10)
	// Nine digits, less the trailing groups of three zeros.
	var frac [9]byte
	for i := 8; i >= 0; i-- {
		frac[i] = byte('0' + nanos%10)
		nanos /= 10
	}
	digits := frac[:]
	for len(digits) > 0 && string(digits[len(digits)-3:]) == "000" {
		digits = digits[:len(digits)-3]
	}
	if len(digits) > 0 {
		b = append(b, '.')
		b = append(b, digits...)
	}
	return append(b, `s"`...), true
}

// appendJSONString quotes s as protojson does: '"', '\\' and control
// characters escaped (\b \f \n \r \t, others \u00xx), everything else,
// HTML characters and U+2028 included, as is. ok is false for a string
// that is not valid UTF-8, which protojson refuses.
func appendJSONString(b []byte, s string) ([]byte, bool) {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return b, false
			}
			i += n
			continue
		}
		if c >= ' ' && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}
