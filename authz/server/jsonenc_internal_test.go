package server

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/reason"
)

// protojsonBody is what writeProto writes for m, the answer before
// appendDecision and appendTokenDecision: jsonOut's encoding, compacted.
func protojsonBody(t *testing.T, m proto.Message) ([]byte, bool) {
	t.Helper()
	b, err := jsonOut.Marshal(m)
	if err != nil {
		return nil, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("protojson wrote invalid JSON %q: %v", b, err)
	}
	return buf.Bytes(), true
}

// checkSameAsProtojson compares appendDecision with protojson for d, and
// appendTokenDecision for the TokenDecision of the same fields.
func checkSameAsProtojson(t *testing.T, d authz.Decision) {
	t.Helper()
	want, wantOK := protojsonBody(t, d.Proto())
	got, ok := appendDecision(nil, d)
	switch {
	case !wantOK && ok:
		t.Fatalf("protojson refuses %+v, appendDecision wrote %s", d, got)
	case ok && !bytes.Equal(got, want):
		t.Fatalf("appendDecision:\n%s\nprotojson:\n%s", got, want)
	}
	td := authz.TokenDecision{Allowed: d.Allowed, Claims: d.Claims, Reason: d.Reason, Subject: d.Subject, TenantID: d.TenantID, Message: d.Message}
	want, wantOK = protojsonBody(t, td.Proto())
	got, ok = appendTokenDecision(nil, td)
	switch {
	case !wantOK && ok:
		t.Fatalf("protojson refuses %+v, appendTokenDecision wrote %s", td, got)
	case ok && !bytes.Equal(got, want):
		t.Fatalf("appendTokenDecision:\n%s\nprotojson:\n%s", got, want)
	}
}

func TestAppendDecisionCases(t *testing.T) {
	floats := []float64{0, math.Copysign(0, -1), 1, -1, 1.5, 0.1, 1e-6, 9.99e-7, 1e-7, 1e-10, 1e20, 1e21, 123456789012345678, 1700000000,
		math.MaxFloat64, math.SmallestNonzeroFloat64, -1e-300, 2.5e-8, 1 << 53, 1<<53 + 2, math.Inf(1), math.Inf(-1), math.NaN()}
	numbers := []json.Number{"0", "-0", "1", "1.0", "1.50", "1e3", "1E-7", "0.0000001", "1e400", "-1e400", "abc", "", "9007199254740992",
		"9007199254740993", "-9007199254740993", "123456789012345", "1234567890123456", "1e21", "12345678901234567890.5"}
	strs := []string{"", "plain", `quo"te`, `back\slash`, "\x00\x01\x1f\x7f", "\b\f\n\r\t", "<a>&", "\u2028\u2029", "héllo ✓ 𝄞",
		"\ufffd", "bad \xff utf8", "\xc3", "tab\there"}
	cases := []authz.Decision{
		{},
		{Allowed: true, Reason: reason.PolicyAllow, DenyReasons: []string{}, DecisionID: "d-1", Subject: "alice", TenantID: "t",
			PolicyRevision: "r", Claims: map[string]any{"sub": "alice", "exp": json.Number("1700000000"), "roles": []any{"viewer"}}},
		{Reason: reason.RateLimited, DenyReasons: []string{"rate-limited", "b"}, RetryAfter: 1500 * time.Millisecond},
		{Claims: map[string]any{}},
		{Claims: map[string]any{"null": nil, "t": true, "f": false, "list": []any{"a", 2.0, nil, map[string]any{"z": 1.0, "a": json.Number("2")}},
			"empty": []any{}, "obj": map[string]any{}, "strs": []string{"a", "b\n"}, "nostrs": []string{}}},
		{Claims: map[string]any{"int": 1}},
		{Claims: map[string]any{"map": map[string]string{"a": "b"}}},
		{Claims: map[string]any{"time": time.Unix(0, 0)}},
		{Claims: map[string]any{"raw": json.RawMessage(`{"a":1}`)}},
		{Claims: map[string]any{"bad \xff key": "v"}},
	}
	for _, f := range floats {
		cases = append(cases, authz.Decision{Claims: map[string]any{"f": f, "l": []any{f}}})
	}
	for _, n := range numbers {
		cases = append(cases, authz.Decision{Claims: map[string]any{"n": n}})
	}
	for _, s := range strs {
		cases = append(cases,
			authz.Decision{Reason: reason.Code(s), DenyReasons: []string{s}, DecisionID: s, Subject: s, TenantID: s, PolicyRevision: s, Message: s},
			authz.Decision{Claims: map[string]any{s: s, "l": []string{s}}},
		)
	}
	for _, d := range []time.Duration{-time.Second, 0, 1, time.Microsecond, time.Millisecond, time.Second, 1500 * time.Millisecond,
		3*time.Second + 10, time.Hour + time.Nanosecond, math.MaxInt64} {
		cases = append(cases, authz.Decision{RetryAfter: d})
	}
	deep := any(nil)
	for range maxJSONDepth + 5 {
		deep = map[string]any{"d": deep}
	}
	cases = append(cases, authz.Decision{Claims: map[string]any{"deep": deep}})
	many := map[string]any{}
	for i := range 40 {
		many[strconv.Itoa(i*7919%97)+"k"] = float64(i)
	}
	cases = append(cases, authz.Decision{Claims: many})
	wide := make([]any, maxJSONNodes+1)
	cases = append(cases, authz.Decision{Claims: map[string]any{"wide": wide}})
	for _, d := range cases {
		checkSameAsProtojson(t, d)
	}
	// The usual answer, a token's claims, is rendered here, not left to
	// protojson.
	if _, ok := appendDecision(nil, cases[1]); !ok {
		t.Error("appendDecision declines a token's claims")
	}
	if _, ok := appendTokenDecision(nil, authz.TokenDecision{Allowed: true, Claims: cases[1].Claims}); !ok {
		t.Error("appendTokenDecision declines a token's claims")
	}
}

// FuzzAppendDecision compares appendDecision and appendTokenDecision with
// protojson over random decisions built from the fuzzer's input.
func FuzzAppendDecision(f *testing.F) {
	f.Add(uint64(1), "alice", "policy-allow", []byte{1, 2, 3})
	f.Add(uint64(2), "b\xffad", "\x00\"\\<", []byte{0xff, 0, 0x7f, 0x80})
	f.Add(uint64(3), "𝄞 \u2028", "1e-7", []byte("0123456789abcdef0123456789abcdef"))
	f.Fuzz(func(t *testing.T, seed uint64, s1, s2 string, raw []byte) {
		rng := rand.New(rand.NewPCG(seed, uint64(len(raw))))
		strs := []string{s1, s2, "", "k", string(raw)}
		pick := func() string { return strs[rng.IntN(len(strs))] }
		float := func() float64 {
			if len(raw) >= 8 && rng.IntN(2) == 0 {
				return math.Float64frombits(binary.LittleEndian.Uint64(raw[rng.IntN(len(raw)-7):]))
			}
			return []float64{0, 1, -1.25, 1e21, 1e-7, 1700000000, rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30))}[rng.IntN(7)]
		}
		var value func(depth int) any
		value = func(depth int) any {
			switch n := rng.IntN(10); {
			case n == 0:
				return nil
			case n == 1:
				return float()
			case n == 2:
				return rng.IntN(2) == 0
			case n == 3:
				return json.Number(pick())
			case n == 4:
				return json.Number(strconv.FormatFloat(float(), 'g', -1, 64))
			case n == 5 && depth < 4:
				var l []any
				for range rng.IntN(4) {
					l = append(l, value(depth+1))
				}
				return l
			case n == 6 && depth < 4:
				m := map[string]any{}
				for range rng.IntN(5) {
					m[pick()] = value(depth + 1)
				}
				return m
			case n == 7:
				return []string{pick(), pick()}
			}
			return pick()
		}
		d := authz.Decision{
			Allowed: rng.IntN(2) == 0, Reason: reason.Code(pick()), DecisionID: pick(), Subject: pick(), TenantID: pick(),
			PolicyRevision: pick(), Message: pick(), RetryAfter: time.Duration(rng.Int64N(1<<45) - 1<<40),
		}
		for range rng.IntN(3) {
			d.DenyReasons = append(d.DenyReasons, pick())
		}
		if rng.IntN(4) > 0 {
			d.Claims = map[string]any{}
			for range rng.IntN(8) {
				d.Claims[pick()] = value(0)
			}
		}
		checkSameAsProtojson(t, d)
	})
}
