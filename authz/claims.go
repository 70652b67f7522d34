package authz

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// Bounds of a claim set converted to a google.protobuf.Struct. Claims
// decoded from a token are a small JSON tree; the bounds only matter for
// odd values (cycles, shared sub-slices) that would otherwise recurse
// forever or blow up.
const (
	maxClaimDepth = 64
	maxClaimNodes = 1 << 16
)

// claimsToStruct converts a claim set into a Struct that always marshals,
// in binary and in protojson: strings and keys are made valid UTF-8,
// non-finite numbers become strings, values JSON cannot hold become their
// JSON encoding or null. An integer beyond ±2^53, which the Struct's
// double would round, is carried exactly as a string of its decimal
// digits ("9007199254740993"). It returns nil for nil claims and never
// fails.
func claimsToStruct(claims map[string]any) *structpb.Struct {
	if claims == nil {
		return nil
	}
	c := claimConverter{budget: maxClaimNodes}
	return c.object(claims, 0)
}

// structToClaims converts a Struct back into a claim set; numbers become
// float64. It returns nil for nil.
func structToClaims(s *structpb.Struct) map[string]any {
	if s == nil {
		return nil
	}
	return s.AsMap()
}

type claimConverter struct {
	budget int
}

func (c *claimConverter) object(m map[string]any, depth int) *structpb.Struct {
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(m))}
	for k, v := range m {
		s.Fields[validUTF8(k)] = c.value(v, depth+1)
	}
	return s
}

func (c *claimConverter) list(vs []any, depth int) *structpb.Value {
	l := &structpb.ListValue{Values: make([]*structpb.Value, 0, len(vs))}
	for _, v := range vs {
		l.Values = append(l.Values, c.value(v, depth+1))
	}
	return structpb.NewListValue(l)
}

func (c *claimConverter) value(v any, depth int) *structpb.Value {
	c.budget--
	if c.budget < 0 || depth > maxClaimDepth {
		return structpb.NewNullValue()
	}
	switch x := v.(type) {
	case nil:
		return structpb.NewNullValue()
	case string:
		return structpb.NewStringValue(validUTF8(x))
	case bool:
		return structpb.NewBoolValue(x)
	case json.Number:
		if isBigInteger(string(x)) {
			// A double cannot hold it exactly: 9007199254740993 would
			// reach clients as ...992. The digits travel as a string.
			return structpb.NewStringValue(string(x))
		}
		f, err := x.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return structpb.NewStringValue(validUTF8(x.String()))
		}
		return structpb.NewNumberValue(f)
	case float64:
		return number(x)
	case float32:
		return number(float64(x))
	case int:
		return intValue(int64(x))
	case int8:
		return structpb.NewNumberValue(float64(x))
	case int16:
		return structpb.NewNumberValue(float64(x))
	case int32:
		return structpb.NewNumberValue(float64(x))
	case int64:
		return intValue(x)
	case uint:
		return uintValue(uint64(x))
	case uint8:
		return structpb.NewNumberValue(float64(x))
	case uint16:
		return structpb.NewNumberValue(float64(x))
	case uint32:
		return structpb.NewNumberValue(float64(x))
	case uint64:
		return uintValue(x)
	case []byte:
		// As encoding/json would carry it.
		return structpb.NewStringValue(base64.StdEncoding.EncodeToString(x))
	case time.Time:
		return structpb.NewStringValue(x.UTC().Format(time.RFC3339Nano))
	case map[string]any:
		return structpb.NewStructValue(c.object(x, depth))
	case []any:
		return c.list(x, depth)
	case []string:
		l := &structpb.ListValue{Values: make([]*structpb.Value, 0, len(x))}
		for _, s := range x {
			c.budget--
			l.Values = append(l.Values, structpb.NewStringValue(validUTF8(s)))
		}
		return structpb.NewListValue(l)
	case map[string]string:
		s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(x))}
		for k, e := range x {
			c.budget--
			s.Fields[validUTF8(k)] = structpb.NewStringValue(validUTF8(e))
		}
		return structpb.NewStructValue(s)
	case json.RawMessage:
		return c.fromJSON(x, depth)
	case *structpb.Value:
		return c.fromProto(x, depth)
	case *structpb.Struct:
		return c.fromProto(structpb.NewStructValue(x), depth)
	}
	// Anything else (named map or slice types, structs, pointers) is
	// carried the way encoding/json would carry it.
	b, err := json.Marshal(v)
	if err != nil {
		return structpb.NewNullValue()
	}
	return c.fromJSON(b, depth)
}

// fromJSON converts a JSON document, keeping numbers exact until the
// conversion to float64.
func (c *claimConverter) fromJSON(b []byte, depth int) *structpb.Value {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var decoded any
	if err := d.Decode(&decoded); err != nil {
		return structpb.NewNullValue()
	}
	return c.value(decoded, depth)
}

// fromProto copies a Value through AsInterface so that it is sanitized
// like any other claim.
func (c *claimConverter) fromProto(v *structpb.Value, depth int) *structpb.Value {
	if v == nil {
		return structpb.NewNullValue()
	}
	return c.value(v.AsInterface(), depth)
}

// maxExactInt is 2^53: every integer of at most this magnitude is exact
// in a double, the number type of google.protobuf.Value and of JSON in
// JavaScript.
const maxExactInt = 1 << 53

// isBigInteger reports whether a JSON number literal is an integer (no
// fraction, no exponent) beyond ±2^53, which a double would round.
func isBigInteger(lit string) bool {
	digits := strings.TrimPrefix(lit, "-")
	if digits == "" || strings.ContainsAny(digits, ".eE") {
		return false
	}
	if len(digits) < 16 {
		return false
	}
	if len(digits) > 16 {
		return true
	}
	return digits > "9007199254740992"
}

func intValue(i int64) *structpb.Value {
	if i > maxExactInt || i < -maxExactInt {
		return structpb.NewStringValue(strconv.FormatInt(i, 10))
	}
	return structpb.NewNumberValue(float64(i))
}

func uintValue(u uint64) *structpb.Value {
	if u > maxExactInt {
		return structpb.NewStringValue(strconv.FormatUint(u, 10))
	}
	return structpb.NewNumberValue(float64(u))
}

func number(f float64) *structpb.Value {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		// protojson cannot write them; JSON has no literal for them.
		return structpb.NewStringValue(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return structpb.NewNumberValue(f)
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
