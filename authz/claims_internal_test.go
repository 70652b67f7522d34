package authz

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svc-dev/svc/internal/testkit"
)

// mustEncode checks that s survives both encodings the service uses.
func mustEncode(t *testing.T, s *structpb.Struct) {
	t.Helper()
	if _, err := proto.Marshal(s); err != nil {
		t.Fatalf("proto.Marshal: %v", err)
	}
	if _, err := protojson.Marshal(s); err != nil {
		t.Fatalf("protojson.Marshal: %v", err)
	}
}

type odd struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

type named map[string]any

func TestClaimsToStruct(t *testing.T) {
	self := map[string]any{}
	self["self"] = self
	loop := []any{nil}
	loop[0] = loop
	wide := []any{"leaf"}
	for range 64 {
		wide = []any{wide, wide}
	}

	tests := []struct {
		name  string
		claim any
		want  any // AsMap form of the converted claim; skip when nil and check is set
		check func(*testing.T, *structpb.Value)
	}{
		{name: "string", claim: "sales", want: "sales"},
		{name: "json number", claim: json.Number("42"), want: 42.0},
		{name: "json number out of range", claim: json.Number("1e400"), want: "1e400"},
		{name: "float NaN", claim: math.NaN(), want: "NaN"},
		{name: "float +Inf", claim: math.Inf(1), want: "+Inf"},
		{name: "int64", claim: int64(1700000000), want: 1.7e9},
		{name: "uint8", claim: uint8(7), want: 7.0},
		{name: "bool", claim: true, want: true},
		{name: "nil", claim: nil, want: nil},
		{name: "invalid UTF-8 string", claim: "a\xffb", want: "a\uFFFDb"},
		{name: "bytes as base64", claim: []byte("hi"), want: "aGk="},
		{name: "time", claim: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600)), want: "2026-01-02T02:04:05Z"},
		{name: "string slice", claim: []string{"a", "b\xff"}, want: []any{"a", "b\uFFFD"}},
		{name: "string map", claim: map[string]string{"k\xff": "v"}, want: map[string]any{"k\uFFFD": "v"}},
		{name: "nested", claim: map[string]any{"l": []any{json.Number("1"), "x", map[string]any{}}}, want: map[string]any{"l": []any{1.0, "x", map[string]any{}}}},
		{name: "struct via JSON", claim: odd{Name: "n", N: 2}, want: map[string]any{"name": "n", "n": 2.0}},
		{name: "named map via JSON", claim: named{"a": 1}, want: map[string]any{"a": 1.0}},
		{name: "raw JSON", claim: json.RawMessage(`{"a":[1,true]}`), want: map[string]any{"a": []any{1.0, true}}},
		{name: "not JSON-encodable", claim: make(chan int), want: nil},
		{name: "structpb value", claim: structpb.NewStringValue("x\xff"), want: "x\uFFFD"},
		{name: "cyclic map is cut", claim: self, check: func(t *testing.T, v *structpb.Value) {
			depth := 0
			for v.GetStructValue() != nil {
				v = v.GetStructValue().Fields["self"]
				depth++
			}
			if depth == 0 || depth > maxClaimDepth+1 {
				t.Errorf("cycle cut at depth %d", depth)
			}
		}},
		{name: "cyclic slice is cut", claim: loop, check: func(*testing.T, *structpb.Value) {}},
		{name: "exponential sharing is bounded", claim: wide, check: func(t *testing.T, v *structpb.Value) {
			if n := countNodes(v); n > maxClaimNodes*2 {
				t.Errorf("%d nodes", n)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// An unbounded conversion of the shared or cyclic values would
			// not end; the node budget is asserted by the checks.
			s := claimsToStruct(map[string]any{"c": tt.claim})
			mustEncode(t, s)
			v := s.Fields["c"]
			if tt.check != nil {
				tt.check(t, v)
				return
			}
			if diff := cmp.Diff(tt.want, v.AsInterface()); diff != "" {
				t.Errorf("converted (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("nil claims are absent", func(t *testing.T) {
		if s := claimsToStruct(nil); s != nil {
			t.Errorf("claimsToStruct(nil) = %v", s)
		}
		if m := structToClaims(nil); m != nil {
			t.Errorf("structToClaims(nil) = %v", m)
		}
	})
	t.Run("invalid UTF-8 key", func(t *testing.T) {
		s := claimsToStruct(map[string]any{"k\xfe": "v"})
		mustEncode(t, s)
		if _, ok := s.Fields["k\uFFFD"]; !ok {
			t.Errorf("fields %v", s.Fields)
		}
	})
}

func countNodes(v *structpb.Value) int {
	n := 1
	for _, e := range v.GetListValue().GetValues() {
		n += countNodes(e)
	}
	for _, e := range v.GetStructValue().GetFields() {
		n += countNodes(e)
	}
	return n
}

// FuzzClaimsToStruct feeds claim sets decoded from arbitrary JSON, plus
// the raw bytes as a key and a value (often invalid UTF-8): the result
// must always encode, and a JSON claim set must round-trip.
func FuzzClaimsToStruct(f *testing.F) {
	for _, seed := range testkit.ReadGlob(f, filepath.Join("testdata", "claims", "*.json")) {
		f.Add(seed.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		claims := map[string]any{string(data): string(data)}
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var decoded map[string]any
		if d.Decode(&decoded) == nil {
			s := claimsToStruct(decoded)
			mustEncode(t, s)
			if got := structToClaims(s); len(got) != len(decoded) && validKeys(decoded) {
				t.Errorf("%d claims in, %d out", len(decoded), len(got))
			}
			claims["decoded"] = decoded
		}
		mustEncode(t, claimsToStruct(claims))
	})
}

func validKeys(m map[string]any) bool {
	for k := range m {
		if validUTF8(k) != k {
			return false
		}
	}
	return true
}

// BenchmarkClaimsToStruct converts the claims of a typical token, as the
// engine decodes them (numbers as json.Number).
func BenchmarkClaimsToStruct(b *testing.B) {
	d := json.NewDecoder(bytes.NewReader([]byte(`{"sub":"alice","tenant_id":"acme","roles":["viewer","billing"],` +
		`"email":"alice@example.com","exp":4102444800,"iat":1700000000,"aud":["shop"],"iss":"https://idp.example",` +
		`"department":"sales","clearance":{"level":3,"tags":["a","b"]}}`)))
	d.UseNumber()
	var claims map[string]any
	if err := d.Decode(&claims); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if s := claimsToStruct(claims); len(s.Fields) != len(claims) {
			b.Fatal("claims lost")
		}
	}
}

func TestBigIntegersAreStrings(t *testing.T) {
	tests := []struct {
		name  string
		claim any
		want  any
	}{
		{"json number at 2^53", json.Number("9007199254740992"), 9007199254740992.0},
		{"json number past 2^53", json.Number("9007199254740993"), "9007199254740993"},
		{"negative json number past 2^53", json.Number("-9007199254740993"), "-9007199254740993"},
		{"exponent stays a number", json.Number("1e20"), 1e20},
		{"int64 past 2^53", int64(1<<53 + 1), "9007199254740993"},
		{"uint64 past 2^53", uint64(1<<64 - 1), "18446744073709551615"},
		{"small int", 42, 42.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := claimsToStruct(map[string]any{"c": tt.claim}).Fields["c"].AsInterface()
			if got != tt.want {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}
