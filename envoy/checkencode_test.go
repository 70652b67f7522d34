package envoy

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// handEncode encodes m with a CheckResponseEncoder; ok is false when the
// encoder declined it.
func handEncode(t testing.TB, m *authv3.CheckResponse) ([]byte, bool) {
	t.Helper()
	var enc CheckResponseEncoder
	size, ok := enc.Prepare(m)
	if !ok {
		return nil, false
	}
	buf := make([]byte, size)
	if err := enc.Encode(buf); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return buf, true
}

// checkSameAsProto fails unless the hand encoding of m is deterministic
// proto.Marshal's, byte for byte, and decodes to m.
func checkSameAsProto(t testing.TB, m *authv3.CheckResponse) {
	t.Helper()
	got, ok := handEncode(t, m)
	if !ok {
		t.Fatalf("encoder declined %v", m)
	}
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatalf("proto.Marshal: %v", err)
	}
	back := decodeSame(t, got, want)
	if m == nil {
		m = &authv3.CheckResponse{}
	}
	if !proto.Equal(m, back) {
		t.Errorf("hand encoding decodes to another message:\n%s", cmp.Diff(m, back, protocmp.Transform()))
	}
}

// verdictAnswers are the sidecar's answers of every kind, with their
// awkward variants: empty strings, non-ASCII, large bodies, extra headers
// to remove.
func verdictAnswers() map[string]*authv3.CheckResponse {
	errPolicy := reason.New(reason.PolicyError, "policy evaluation failed")
	limited := engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "bob", TenantID: "acme"},
		Decision: engine.Decision{Reason: reason.RateLimited, RetryAfter: 1500 * time.Millisecond, DecisionID: "d-4"},
	}
	denied := engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "bob", TenantID: "acme"},
		Decision: engine.Decision{Reason: reason.PolicyDeny, DenyReasons: []string{"not-owner", "ünïcødé ✓"}, DecisionID: "d-5"},
	}
	out := map[string]*authv3.CheckResponse{
		"allow":            CheckResponse(allowedResult("user-417", "acme", []string{"viewer", "x,admin"}, "0b7f4d2c-8a3e-4c1b"), nil),
		"allow empty":      CheckResponse(allowedResult("", "", nil, ""), nil),
		"allow non-ascii":  CheckResponse(allowedResult("Zoë 李", "ténant", []string{"rôle", "角色"}, "d-1"), nil),
		"allow long":       CheckResponse(allowedResult(strings.Repeat("s", 70<<10), "acme", []string{strings.Repeat("r", 200)}, "d-2"), nil),
		"deny":             CheckResponse(denied, nil),
		"rate limited":     CheckResponse(limited, nil),
		"token missing":    CheckResponse(engine.Result{Token: engine.TokenDecision{Reason: reason.TokenMissing}}, nil),
		"token expired":    CheckResponse(engine.Result{Token: engine.TokenDecision{Reason: reason.TokenExpired}}, nil),
		"jwks unavailable": CheckResponse(engine.Result{Token: engine.TokenDecision{Reason: reason.JWKSUnavailable}}, nil),
		"no decision":      CheckResponse(engine.Result{Token: engine.TokenDecision{Allowed: true}, Decision: engine.Decision{DecisionID: "d-6"}}, errPolicy),
		"invalid input":    func() *authv3.CheckResponse { v := invalidInput(errors.New("bad"), ""); return v.checkResponse(nil) }(),
		"zero verdict":     (&verdict{}).checkResponse(nil),
		"allow extra remove": func() *authv3.CheckResponse {
			v := decide(allowedResult("alice", "acme", []string{"viewer"}, "d-7"), nil)
			return v.checkResponse([]string{"x-svc-admin", "", "x-svc-é"})
		}(),
	}
	for _, r := range []struct {
		name string
		res  engine.Result
		err  error
	}{
		{"deny", denied, nil},
		{"rate limited", limited, nil},
		{"token missing", engine.Result{Token: engine.TokenDecision{Reason: reason.TokenMissing}}, nil},
		{"no decision", engine.Result{}, errPolicy},
	} {
		v := decide(r.res, r.err)
		v.html = true
		out["page "+r.name] = v.checkResponse(nil)
		v.login, v.redirect = "/saml/login?return_to=%2Forders%2F%C3%A9", true
		out["redirect "+r.name] = v.checkResponse(nil)
	}
	large := decide(denied, nil)
	large.body.DenyReasons = []string{strings.Repeat("why ", 40<<10)}
	out["deny large body"] = large.checkResponse(nil)
	return out
}

// builtAnswers are answers the sidecar does not give but the encoder
// handles: every field and value kind it knows.
func builtAnswers() map[string]*authv3.CheckResponse {
	hdr := func(k, v string) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}}
	}
	many := map[string]*structpb.Value{}
	for i := range 20 {
		many["k"+strconv.Itoa(19-i)] = structpb.NewStringValue(strings.Repeat("v", i))
	}
	return map[string]*authv3.CheckResponse{
		"nil":            nil,
		"empty":          {},
		"empty status":   {Status: &rpcstatus.Status{}},
		"negative code":  {Status: &rpcstatus.Status{Code: -7, Message: "m"}},
		"empty metadata": {DynamicMetadata: &structpb.Struct{}},
		"empty ok":       {HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{}}},
		"empty denied":   {HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{Status: &typev3.HttpStatus{}}}},
		"ok every field": {
			Status: &rpcstatus.Status{},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
				Headers: []*corev3.HeaderValueOption{
					hdr("a", "1"), hdr("", ""), {},
					{Header: &corev3.HeaderValue{Key: "raw", RawValue: []byte{0, 0xff, 'x'}}},
					{Header: &corev3.HeaderValue{}, Append: wrapperspb.Bool(true), KeepEmptyValue: true},
					{Append: wrapperspb.Bool(false), AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS},
					{AppendAction: corev3.HeaderValueOption_HeaderAppendAction(-1)},
				},
				HeadersToRemove:         []string{"", "x-a", "ß"},
				ResponseHeadersToAdd:    []*corev3.HeaderValueOption{hdr("set-cookie", "a=b")},
				QueryParametersToRemove: []string{"q", ""},
			}},
		},
		"denied every field": {
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status:  &typev3.HttpStatus{Code: typev3.StatusCode(-3)},
				Headers: []*corev3.HeaderValueOption{hdr("k", strings.Repeat("v", 300))},
				Body:    strings.Repeat("é", 100<<10),
			}},
		},
		"error response": {
			Status: &rpcstatus.Status{Code: 13},
			HttpResponse: &authv3.CheckResponse_ErrorResponse{ErrorResponse: &authv3.DeniedHttpResponse{
				Status: &typev3.HttpStatus{Code: 500}, Headers: []*corev3.HeaderValueOption{hdr("a", "b")}, Body: "body",
			}},
			DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue("v")}},
		},
		"scalar values": {DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{
			"":      structpb.NewStringValue(""),
			"é":     structpb.NewStringValue("✓"),
			"null":  structpb.NewNullValue(),
			"null-": {Kind: &structpb.Value_NullValue{NullValue: structpb.NullValue(-1)}},
			"true":  structpb.NewBoolValue(true),
			"false": structpb.NewBoolValue(false),
			"zero":  structpb.NewNumberValue(0),
			"-zero": structpb.NewNumberValue(math.Copysign(0, -1)),
			"nan":   structpb.NewNumberValue(math.NaN()),
			"inf":   structpb.NewNumberValue(math.Inf(-1)),
			"pi":    structpb.NewNumberValue(math.Pi),
		}}},
		"twenty values": {DynamicMetadata: &structpb.Struct{Fields: many}},
	}
}

// TestCheckResponseEncoderMatchesProto: every answer the sidecar gives,
// and every shape the encoder handles, is encoded as deterministic
// proto.Marshal encodes it.
func TestCheckResponseEncoderMatchesProto(t *testing.T) {
	for name, m := range verdictAnswers() {
		t.Run(name, func(t *testing.T) { checkSameAsProto(t, m) })
	}
	for name, m := range builtAnswers() {
		t.Run(name, func(t *testing.T) {
			if name == "scalar values" {
				// NaN is unequal to itself: proto.Equal cannot hold.
				got, _ := handEncode(t, m)
				want, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
				if string(got) != string(want) {
					t.Errorf("hand encoding differs from proto.Marshal's\n hand: %x\nproto: %x", got, want)
				}
				return
			}
			checkSameAsProto(t, m)
		})
	}
}

// TestCheckResponseEncoderDeclines: what the encoder does not handle is
// left to proto marshaling, never encoded partly.
func TestCheckResponseEncoderDeclines(t *testing.T) {
	withUnknown := func(m proto.Message) proto.Message {
		m.ProtoReflect().SetUnknown(protoreflect.RawFields{0xf8, 0x3e, 0x01}) // field 1000, varint 1
		return m
	}
	okWith := func(ok *authv3.OkHttpResponse) *authv3.CheckResponse {
		return &authv3.CheckResponse{HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: ok}}
	}
	mdWith := func(v *structpb.Value) *authv3.CheckResponse {
		return &authv3.CheckResponse{DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{"a": structpb.NewStringValue("a"), "k": v}}}
	}
	nested, _ := structpb.NewStruct(map[string]any{"a": "b"})
	bad := string([]byte{'a', 0xff})
	cases := map[string]*authv3.CheckResponse{
		"nil error response":      {HttpResponse: &authv3.CheckResponse_ErrorResponse{}},
		"nil ok response":         {HttpResponse: &authv3.CheckResponse_OkResponse{}},
		"nil ok oneof":            {HttpResponse: (*authv3.CheckResponse_OkResponse)(nil)},
		"nil denied response":     {HttpResponse: &authv3.CheckResponse_DeniedResponse{}},
		"status details":          {Status: &rpcstatus.Status{Details: []*anypb.Any{{}}}},
		"query parameters to set": okWith(&authv3.OkHttpResponse{QueryParametersToSet: []*corev3.QueryParameter{{Key: "a"}}}),
		//lint:ignore SA1019 a deprecated field set must be declined
		"ok dynamic metadata":        okWith(&authv3.OkHttpResponse{DynamicMetadata: &structpb.Struct{}}),
		"nil header":                 okWith(&authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{nil}}),
		"struct value":               mdWith(structpb.NewStructValue(nested)),
		"list value":                 mdWith(structpb.NewListValue(&structpb.ListValue{})),
		"value without kind":         mdWith(&structpb.Value{}),
		"nil value":                  mdWith(nil),
		"unknown fields":             withUnknown(&authv3.CheckResponse{}).(*authv3.CheckResponse),
		"unknown fields in header":   okWith(&authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{{Header: withUnknown(&corev3.HeaderValue{}).(*corev3.HeaderValue)}}}),
		"unknown fields in value":    mdWith(withUnknown(structpb.NewStringValue("v")).(*structpb.Value)),
		"invalid UTF-8 body":         {HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{Body: bad}}},
		"invalid UTF-8 header":       okWith(&authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "k", Value: bad}}}}),
		"invalid UTF-8 remove":       okWith(&authv3.OkHttpResponse{HeadersToRemove: []string{bad}}),
		"invalid UTF-8 message":      {Status: &rpcstatus.Status{Message: bad}},
		"invalid UTF-8 metadata":     mdWith(structpb.NewStringValue(bad)),
		"invalid UTF-8 metadata key": {DynamicMetadata: &structpb.Struct{Fields: map[string]*structpb.Value{bad: structpb.NewStringValue("")}}},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			var enc CheckResponseEncoder
			if size, ok := enc.Prepare(m); ok {
				t.Errorf("Prepare = %d, true; want the message declined", size)
			}
			if err := enc.Encode(nil); err == nil {
				t.Error("Encode after a declined Prepare succeeded")
			}
		})
	}
}

// TestCheckResponseEncoderChanged: a message that changes between Prepare
// and Encode, or a buffer of another size, is an error, never a panic or
// a wrong encoding.
func TestCheckResponseEncoderChanged(t *testing.T) {
	for _, delta := range []int{-3, 0, 3, 300} {
		m := CheckResponse(allowedResult("alice", "acme", nil, "d-1"), nil)
		var enc CheckResponseEncoder
		size, ok := enc.Prepare(m)
		if !ok {
			t.Fatal("allowed answer declined")
		}
		m.GetOkResponse().Headers[0].Header.Value = strings.Repeat("a", max(0, len("alice")+delta))
		err := enc.Encode(make([]byte, size))
		if delta != 0 && err == nil {
			t.Errorf("value %+d bytes after Prepare: Encode succeeded", delta)
		}
		if delta == 0 && err != nil {
			t.Errorf("value of the same length after Prepare: %v", err)
		}
	}
	var enc CheckResponseEncoder
	size, _ := enc.Prepare(CheckResponse(allowedResult("alice", "acme", nil, "d-1"), nil))
	for _, n := range []int{0, size - 1, size + 1} {
		if err := enc.Encode(make([]byte, n)); err == nil {
			t.Errorf("buffer of %d bytes for %d: Encode succeeded", n, size)
		}
	}
	if err := enc.Encode(make([]byte, size)); err != nil {
		t.Errorf("prepared size after refused buffers: %v", err)
	}
	if err := enc.Encode(make([]byte, size)); err == nil {
		t.Error("a second Encode without Prepare succeeded")
	}
}

// encodedFields lists, per message the encoder writes, the fields it
// writes and the ones it declines: together, all the message has. A
// field added by a new go-control-plane would be silently dropped, so it
// must be listed here first.
var encodedFields = map[protoreflect.FullName][]protoreflect.FieldNumber{
	"envoy.service.auth.v3.CheckResponse":      {fStatus, fDenied, fOK, fMetadata, fError},
	"google.rpc.Status":                        {fStatusCode, fStatusMessage, 3 /* details, declined */},
	"envoy.service.auth.v3.DeniedHttpResponse": {fDeniedStatus, fDeniedHeaders, fDeniedBody},
	"envoy.type.v3.HttpStatus":                 {fHTTPStatusCode},
	"envoy.service.auth.v3.OkHttpResponse":     {fOKHeaders, fOKMetadata, fOKRemove, fOKResponseHeaders, fOKQuerySet, fOKQueryRemove},
	"envoy.config.core.v3.HeaderValueOption":   {fOptionHeader, fOptionAppend, fOptionAction, fOptionKeepEmpty},
	"envoy.config.core.v3.HeaderValue":         {fHeaderKey, fHeaderValue, fHeaderRaw},
	"google.protobuf.BoolValue":                {fBoolValue},
	"google.protobuf.Struct":                   {fStructFields},
	"google.protobuf.Value":                    {fNull, fNumber, fString, fBool, 5, 6 /* struct, list: declined */},
}

func TestCheckResponseEncoderKnowsEveryField(t *testing.T) {
	for _, m := range []proto.Message{
		&authv3.CheckResponse{}, &rpcstatus.Status{}, &authv3.DeniedHttpResponse{}, &typev3.HttpStatus{},
		&authv3.OkHttpResponse{}, &corev3.HeaderValueOption{}, &corev3.HeaderValue{}, &wrapperspb.BoolValue{},
		&structpb.Struct{}, &structpb.Value{},
	} {
		d := m.ProtoReflect().Descriptor()
		var have []protoreflect.FieldNumber
		for i := range d.Fields().Len() {
			have = append(have, d.Fields().Get(i).Number())
		}
		slices.Sort(have)
		want, ok := encodedFields[d.FullName()]
		if !ok {
			t.Errorf("%s: not listed", d.FullName())
			continue
		}
		if diff := cmp.Diff(want, have); diff != "" {
			t.Errorf("%s: fields differ from the encoder's (-encoder +message):\n%s", d.FullName(), diff)
		}
	}
}

// TestCheckResponseEncoderAllocs: sizing and writing an allowed answer
// allocate nothing (the metadata's entries are sorted on the stack).
func TestCheckResponseEncoderAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	m := CheckResponse(allowedResult("user-417", "acme", []string{"viewer"}, "0b7f4d2c-8a3e-4c1b"), nil)
	buf := make([]byte, 1024)
	allocs := testing.AllocsPerRun(200, func() {
		var enc CheckResponseEncoder
		size, ok := enc.Prepare(m)
		if !ok || enc.Encode(buf[:size]) != nil {
			t.Fatal("allowed answer not encoded")
		}
	})
	if allocs > 0 {
		t.Errorf("encoding an allowed answer: %v allocations, want 0", allocs)
	}
}

// BenchmarkCheckResponseEncoder compares the encoder with deterministic
// proto.Marshal on an allowed answer and a JSON denial.
func BenchmarkCheckResponseEncoder(b *testing.B) {
	v := decide(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "bob", TenantID: "acme"},
		Decision: engine.Decision{Reason: reason.PolicyDeny, DenyReasons: []string{"not-owner"}, DecisionID: "d-5"},
	}, nil)
	for _, bc := range []struct {
		name string
		m    *authv3.CheckResponse
	}{
		{"allow", CheckResponse(allowedResult("user-417", "acme", []string{"viewer"}, "0b7f4d2c-8a3e-4c1b-9f6d-2e5a7c9b1d3f"), nil)},
		{"deny", v.checkResponse(nil)},
	} {
		b.Run(bc.name+"/hand", func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 4096)
			for b.Loop() {
				var enc CheckResponseEncoder
				size, ok := enc.Prepare(bc.m)
				if !ok || enc.Encode(buf[:size]) != nil {
					b.Fatal("not encoded")
				}
			}
		})
		b.Run(bc.name+"/proto", func(b *testing.B) {
			b.ReportAllocs()
			opts := proto.MarshalOptions{Deterministic: true}
			buf := make([]byte, 0, 4096)
			for b.Loop() {
				if _, err := opts.MarshalAppend(buf[:0], bc.m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestHasUnknown: the unknown fields are found where protoc-gen-go keeps
// them in every message the encoder reads, and read right.
func TestHasUnknown(t *testing.T) {
	checkUnknown(t, &authv3.CheckResponse{}, unknownCheckResponse)
	checkUnknown(t, &rpcstatus.Status{}, unknownStatus)
	checkUnknown(t, &authv3.DeniedHttpResponse{}, unknownDenied)
	checkUnknown(t, &typev3.HttpStatus{}, unknownHTTPStatus)
	checkUnknown(t, &authv3.OkHttpResponse{}, unknownOK)
	checkUnknown(t, &corev3.HeaderValueOption{}, unknownOption)
	checkUnknown(t, &corev3.HeaderValue{}, unknownHeader)
	checkUnknown(t, &wrapperspb.BoolValue{}, unknownBool)
	checkUnknown(t, &structpb.Struct{}, unknownStruct)
	checkUnknown(t, &structpb.Value{}, unknownValue)
	// A type without the field is asked through ProtoReflect.
	checkUnknown(t, &authv3.CheckResponse{}, unknownAt{})
}

func checkUnknown[T any, P interface {
	*T
	proto.Message
}](t *testing.T, m P, at unknownAt) {
	t.Helper()
	name := m.ProtoReflect().Descriptor().FullName()
	if at == (unknownAt{}) && name != "envoy.service.auth.v3.CheckResponse" {
		t.Errorf("%s: unknownFields not found", name)
	}
	if hasUnknown(m, at) {
		t.Errorf("%s: unknown fields in an empty message", name)
	}
	m.ProtoReflect().SetUnknown(protoreflect.RawFields{0xf8, 0x3e, 0x01})
	if !hasUnknown(m, at) {
		t.Errorf("%s: unknown fields not seen", name)
	}
	m.ProtoReflect().SetUnknown(nil)
	if hasUnknown(m, at) {
		t.Errorf("%s: unknown fields seen after they were cleared", name)
	}
}

// decodeSame fails t unless got, a hand encoding, is want, the bytes
// proto.Marshal gives, and decodes; it returns the decoded answer.
func decodeSame(t testing.TB, got, want []byte) *authv3.CheckResponse {
	t.Helper()
	if string(got) != string(want) {
		t.Fatalf("hand encoding differs from proto.Marshal's\n hand: %x\nproto: %x", got, want)
	}
	var back authv3.CheckResponse
	if err := proto.Unmarshal(got, &back); err != nil {
		t.Fatalf("hand encoding does not decode: %v", err)
	}
	return &back
}
