package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/svc-dev/svc/authz/v1"
)

// protojsonBody is what writeProto wrote for r before
// appendAuthorizeResponse: jsonOut's encoding, compacted.
func protojsonBody(t *testing.T, r *authzv1.AuthorizeResponse) ([]byte, bool) {
	t.Helper()
	b, err := jsonOut.Marshal(r)
	if err != nil {
		return nil, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("protojson wrote invalid JSON %q: %v", b, err)
	}
	return buf.Bytes(), true
}

func checkSameAsProtojson(t *testing.T, r *authzv1.AuthorizeResponse) {
	t.Helper()
	want, wantOK := protojsonBody(t, r)
	got, ok := appendAuthorizeResponse(nil, r)
	switch {
	case !wantOK && ok:
		t.Fatalf("protojson refuses %v, appendAuthorizeResponse wrote %s", r, got)
	case wantOK && !ok:
		// Falling back is always correct; it must stay the odd case.
		t.Logf("appendAuthorizeResponse falls back on %s", want)
	case ok && !bytes.Equal(got, want):
		t.Fatalf("appendAuthorizeResponse:\n%s\nprotojson:\n%s", got, want)
	}
}

// rawValue builds a Value without the checks of structpb's constructors.
func num(f float64) *structpb.Value {
	return &structpb.Value{Kind: &structpb.Value_NumberValue{NumberValue: f}}
}
func str(s string) *structpb.Value {
	return &structpb.Value{Kind: &structpb.Value_StringValue{StringValue: s}}
}
func object(kv ...any) *structpb.Struct {
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Fields[kv[i].(string)], _ = kv[i+1].(*structpb.Value)
	}
	return s
}

func TestAppendAuthorizeResponseCases(t *testing.T) {
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 1.5, 0.1, 1e-6, 9.99e-7, 1e-7, 1e-10, 1e20, 1e21, 123456789012345678, 1700000000,
		math.MaxFloat64, math.SmallestNonzeroFloat64, -1e-300, 2.5e-8, 1 << 53, 1<<53 + 2, math.Inf(1), math.Inf(-1), math.NaN()}
	strs := []string{"", "plain", `quo"te`, `back\slash`, "\x00\x01\x1f\x7f", "\b\f\n\r\t", "<a>&", "\u2028\u2029", "héllo ✓ 𝄞",
		"\ufffd", "bad \xff utf8", "\xc3", "tab\there"}
	var cases []*authzv1.AuthorizeResponse
	cases = append(cases,
		&authzv1.AuthorizeResponse{},
		&authzv1.AuthorizeResponse{Allowed: true, Reason: "policy-allow", DenyReasons: []string{}, DecisionId: "d-1", Subject: "alice",
			TenantId: "t", PolicyRevision: "r", Claims: object("sub", str("alice"), "n", num(1.5))},
		&authzv1.AuthorizeResponse{Reason: "rate-limited", DenyReasons: []string{"rate-limited", "b"}, RetryAfter: durationpb.New(1500 * time.Millisecond)},
		&authzv1.AuthorizeResponse{Claims: &structpb.Struct{}},
		&authzv1.AuthorizeResponse{Claims: object("nil", nil)},
		&authzv1.AuthorizeResponse{Claims: object("nokind", &structpb.Value{})},
		&authzv1.AuthorizeResponse{Claims: object("nilstruct", &structpb.Value{Kind: &structpb.Value_StructValue{}})},
		&authzv1.AuthorizeResponse{Claims: object("nillist", &structpb.Value{Kind: &structpb.Value_ListValue{}})},
		&authzv1.AuthorizeResponse{Claims: object("null", structpb.NewNullValue(), "t", structpb.NewBoolValue(true), "f", structpb.NewBoolValue(false),
			"list", structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{str("a"), num(2), structpb.NewNullValue(),
				structpb.NewStructValue(object("z", num(1), "a", num(2)))}}),
			"empty", structpb.NewListValue(&structpb.ListValue{}), "obj", structpb.NewStructValue(object()))},
	)
	for _, f := range floats {
		cases = append(cases, &authzv1.AuthorizeResponse{Claims: object("f", num(f))})
	}
	for _, s := range strs {
		cases = append(cases,
			&authzv1.AuthorizeResponse{Reason: s, DenyReasons: []string{s}, DecisionId: s, Subject: s, TenantId: s, PolicyRevision: s, Message: s},
			&authzv1.AuthorizeResponse{Claims: object(s, str(s))},
		)
	}
	for _, d := range []*durationpb.Duration{{}, {Seconds: 1}, {Nanos: 1}, {Nanos: -1}, {Seconds: -2, Nanos: -500000000}, {Seconds: 1, Nanos: 1000},
		{Seconds: 1, Nanos: 1000000}, {Seconds: 3, Nanos: 10}, {Seconds: 315576000000}, {Seconds: 315576000001}, {Seconds: 1, Nanos: -1},
		{Seconds: -1, Nanos: 1}, {Nanos: 1000000000}, {Seconds: -315576000000, Nanos: -999999999}} {
		cases = append(cases, &authzv1.AuthorizeResponse{RetryAfter: d})
	}
	deep := structpb.NewNullValue()
	for range maxJSONDepth + 5 {
		deep = structpb.NewStructValue(object("d", deep))
	}
	cases = append(cases, &authzv1.AuthorizeResponse{Claims: object("deep", deep)})
	many := object()
	for i := range 40 {
		many.Fields[string(rune('a'+i%26))+string(rune('A'+i))] = num(float64(i))
	}
	cases = append(cases, &authzv1.AuthorizeResponse{Claims: many})
	for _, r := range cases {
		checkSameAsProtojson(t, r)
	}
}

// FuzzAppendAuthorizeResponse compares appendAuthorizeResponse with
// protojson over random responses built from the fuzzer's bytes.
func FuzzAppendAuthorizeResponse(f *testing.F) {
	f.Add(uint64(1), "alice", "policy-allow", []byte{1, 2, 3})
	f.Add(uint64(2), "b\xffad", "\x00\"\\<", []byte{0xff, 0, 0x7f, 0x80})
	f.Add(uint64(3), "𝄞 \u2028", "", []byte("0123456789abcdef0123456789abcdef"))
	f.Fuzz(func(t *testing.T, seed uint64, s1, s2 string, raw []byte) {
		rng := rand.New(rand.NewPCG(seed, uint64(len(raw))))
		strs := []string{s1, s2, "", "k", string(raw)}
		pick := func() string { return strs[rng.IntN(len(strs))] }
		var float func() float64
		float = func() float64 {
			if len(raw) >= 8 && rng.IntN(2) == 0 {
				return math.Float64frombits(binary.LittleEndian.Uint64(raw[rng.IntN(len(raw)-7):]))
			}
			return []float64{0, 1, -1.25, 1e21, 1e-7, 1700000000, rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30))}[rng.IntN(7)]
		}
		var value func(depth int) *structpb.Value
		value = func(depth int) *structpb.Value {
			switch n := rng.IntN(7); {
			case n == 0:
				return structpb.NewNullValue()
			case n == 1:
				return num(float())
			case n == 2:
				return structpb.NewBoolValue(rng.IntN(2) == 0)
			case n == 3 && depth < 4:
				l := &structpb.ListValue{}
				for range rng.IntN(4) {
					l.Values = append(l.Values, value(depth+1))
				}
				return structpb.NewListValue(l)
			case n == 4 && depth < 4:
				s := object()
				for range rng.IntN(5) {
					s.Fields[pick()] = value(depth + 1)
				}
				return structpb.NewStructValue(s)
			}
			return str(pick())
		}
		r := &authzv1.AuthorizeResponse{
			Allowed: rng.IntN(2) == 0, Reason: pick(), DecisionId: pick(), Subject: pick(), TenantId: pick(),
			PolicyRevision: pick(), Message: pick(),
		}
		for range rng.IntN(3) {
			r.DenyReasons = append(r.DenyReasons, pick())
		}
		if rng.IntN(4) > 0 {
			r.Claims = object()
			for range rng.IntN(8) {
				r.Claims.Fields[pick()] = value(0)
			}
		}
		if rng.IntN(3) == 0 {
			r.RetryAfter = &durationpb.Duration{Seconds: rng.Int64N(1<<40) - 1<<39, Nanos: rng.Int32N(2e9) - 1e9}
			if rng.IntN(2) == 0 {
				r.RetryAfter = durationpb.New(time.Duration(rng.Int64()))
			}
		}
		checkSameAsProtojson(t, r)
	})
}
