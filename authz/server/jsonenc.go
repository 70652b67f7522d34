package server

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/internal/jsonstr"
)

// Bounds of the claims appendDecision renders itself; larger or deeper
// claim sets (which tokens do not carry) take the protojson path.
const (
	maxJSONDepth = 32
	maxJSONNodes = 4096
)

// appendDecision appends d to b as the local API answers it:
// d.Proto() rendered by protojson (jsonOut: proto field names, unpopulated
// fields written) and compacted, byte for byte. That is the fields in
// declaration order, the claims as claimsToStruct converts them with
// their keys sorted, numbers, durations and strings formatted and escaped
// as protojson does. It renders the decision itself, instead of building
// a Struct of the claims and walking the message through protoreflect,
// which allocate for nearly every field and claim.
//
// ok is false, b then being of no use, when d holds anything this encoder
// leaves to that path: a string that is not valid UTF-8 (claimsToStruct
// repairs those in claims, protojson refuses them elsewhere), a claim of
// another type than those decoded from a token's JSON (string, bool, nil,
// json.Number, float64, map[string]any, []any, []string), a number
// literal of 16 characters or more (which may be an integer beyond 2^53),
// more than maxJSONNodes claims or claims nested deeper than
// maxJSONDepth.
func appendDecision(b []byte, d authz.Decision) (_ []byte, ok bool) {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	if b, ok = appendField(b, `,"reason":`, string(d.Reason)); !ok {
		return b, false
	}
	b = append(b, `,"deny_reasons":[`...)
	for i, s := range d.DenyReasons {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendJSONString(b, s); !ok {
			return b, false
		}
	}
	b = append(b, ']')
	if b, ok = appendField(b, `,"decision_id":`, d.DecisionID); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"subject":`, d.Subject); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"tenant_id":`, d.TenantID); !ok {
		return b, false
	}
	if b, ok = appendClaims(b, d.Claims); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"policy_revision":`, d.PolicyRevision); !ok {
		return b, false
	}
	b = append(b, `,"retry_after":`...)
	if d.RetryAfter > 0 {
		b = appendDuration(b, int64(d.RetryAfter/time.Second), int64(d.RetryAfter%time.Second))
	} else {
		b = append(b, "null"...)
	}
	if b, ok = appendField(b, `,"message":`, d.Message); !ok {
		return b, false
	}
	return append(b, '}'), true
}

// appendTokenDecision is appendDecision for the answer of
// /v1/validate-token: d.Proto() as protojson renders it, compacted.
func appendTokenDecision(b []byte, d authz.TokenDecision) (_ []byte, ok bool) {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	if b, ok = appendClaims(b, d.Claims); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"reason":`, string(d.Reason)); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"subject":`, d.Subject); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"tenant_id":`, d.TenantID); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"message":`, d.Message); !ok {
		return b, false
	}
	if b, ok = appendField(b, `,"decision_id":`, d.DecisionID); !ok {
		return b, false
	}
	return append(b, '}'), true
}

// appendClaims appends the "claims" member: null for nil claims, else
// the claims as appendClaimObject renders them.
func appendClaims(b []byte, claims map[string]any) ([]byte, bool) {
	b = append(b, `,"claims":`...)
	if claims == nil {
		return append(b, "null"...), true
	}
	nodes := 0
	return appendClaimObject(b, claims, 0, &nodes)
}

func appendField(b []byte, name, value string) ([]byte, bool) {
	return appendJSONString(append(b, name...), value)
}

// appendClaimObject renders a claim object: keys sorted.
func appendClaimObject(b []byte, m map[string]any, depth int, nodes *int) (_ []byte, ok bool) {
	if depth > maxJSONDepth {
		return b, false
	}
	var arr [16]string
	keys := jsonstr.SortedKeys(arr[:0], m)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		if b, ok = appendJSONString(b, k); !ok {
			return b, false
		}
		b = append(b, ':')
		if b, ok = appendClaim(b, m[k], depth+1, nodes); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendClaim renders one claim value as claimsToStruct converts it and
// protojson then writes it.
func appendClaim(b []byte, v any, depth int, nodes *int) (_ []byte, ok bool) {
	*nodes++
	if *nodes > maxJSONNodes || depth > maxJSONDepth {
		return b, false
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendJSONString(b, x)
	case bool:
		return strconv.AppendBool(b, x), true
	case json.Number:
		if len(x) >= 16 {
			return b, false
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return appendJSONString(b, x.String())
		}
		return appendFloat(b, f), true
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return appendJSONString(b, strconv.FormatFloat(x, 'g', -1, 64))
		}
		return appendFloat(b, x), true
	case map[string]any:
		return appendClaimObject(b, x, depth, nodes)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendClaim(b, e, depth+1, nodes); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case []string:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			*nodes++
			if b, ok = appendJSONString(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
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

// appendDuration renders a positive google.protobuf.Duration as protojson
// does: seconds with 0, 3, 6 or 9 fractional digits and "s", as a string.
func appendDuration(b []byte, secs, nanos int64) []byte {
	b = append(b, '"')
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
	return append(b, `s"`...)
}

// appendJSONString quotes s as protojson does: '"', '\\' and control
// characters escaped (\b \f \n \r \t, others \u00xx), everything else,
// HTML characters and U+2028 included, as is. ok is false for a string
// that is not valid UTF-8, which protojson refuses.
func appendJSONString(b []byte, s string) ([]byte, bool) {
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
		b = jsonstr.AppendEscapedASCII(b, c)
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}
