package envoy

import (
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/reason"
)

// fuzzAnswer builds a CheckResponse from fuzzed values: the sidecar's own
// answers (every verdict kind, as a browser or an API client sees it,
// with headers to remove) when sel's low bit is clear, else one built
// field by field. exotic reports a part the encoder declines whatever the
// strings hold; answer is the sidecar's answer as a CheckAnswer.
func fuzzAnswer(sel uint32, a, b, c, body string, code int32, num float64) (m *authv3.CheckResponse, answer *CheckAnswer, exotic bool) {
	bit := func(n uint) bool { return sel>>n&1 == 1 }
	if !bit(0) {
		var res engine.Result
		var err error
		res.Token = engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: a, TenantID: b}
		res.Decision = engine.Decision{DecisionID: c, DenyReasons: strings.Split(body, "\n")}
		res.Input.User.Roles = strings.Split(c, ";")
		switch sel >> 1 % 6 {
		case 0:
			res.Decision.Allow, res.Decision.Reason = true, reason.PolicyAllow
		case 1:
			res.Decision.Reason = reason.Code(a)
		case 2:
			res.Decision.Reason, res.Decision.RetryAfter = reason.RateLimited, time.Duration(code)*time.Millisecond
		case 3:
			res.Token = engine.TokenDecision{Reason: reason.Code(b)}
		case 4:
			res.Token.Reason = reason.JWKSUnavailable
			res.Token.Allowed = false
		case 5:
			err = reason.New(reason.Code(b), "failed")
		}
		v := decide(res, err)
		v.html = bit(4)
		if bit(5) && !v.allow {
			v.login, v.redirect = "/login?return_to="+a, bit(6)
		}
		var remove []string
		if bit(7) {
			remove = strings.Split(body, " ")
		}
		return v.checkResponse(remove), &CheckAnswer{v: v, remove: remove}, false
	}
	hdr := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: a, Value: b}, AppendAction: corev3.HeaderValueOption_HeaderAppendAction(code % 5)}
	if bit(1) {
		hdr.Header.RawValue = []byte(c)
	}
	if bit(2) {
		//lint:ignore SA1019 the encoder must write it as protobuf does
		hdr.Append = wrapperspb.Bool(bit(3))
	}
	hdr.KeepEmptyValue = bit(4)
	m = &authv3.CheckResponse{}
	if bit(5) {
		m.Status = &rpcstatus.Status{Code: code, Message: c}
	}
	switch sel >> 6 % 4 {
	case 1:
		m.HttpResponse = &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers: []*corev3.HeaderValueOption{hdr, hdr}, HeadersToRemove: strings.Split(body, ","),
			ResponseHeadersToAdd: []*corev3.HeaderValueOption{hdr}, QueryParametersToRemove: []string{a},
		}}
	case 2:
		m.HttpResponse = &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status: &typev3.HttpStatus{Code: typev3.StatusCode(code)}, Headers: []*corev3.HeaderValueOption{hdr}, Body: body,
		}}
	case 3:
		m.HttpResponse = &authv3.CheckResponse_ErrorResponse{ErrorResponse: &authv3.DeniedHttpResponse{Body: body}}
	}
	if bit(8) {
		fields := map[string]*structpb.Value{a: structpb.NewStringValue(b), b: structpb.NewBoolValue(bit(9)), c: structpb.NewNumberValue(num)}
		for i, k := range strings.Split(body, ",") {
			switch i % 3 {
			case 0:
				fields[k] = structpb.NewNullValue()
			case 1:
				fields[k] = structpb.NewStringValue(a)
			case 2:
				fields[k] = structpb.NewNumberValue(float64(i))
			}
		}
		if bit(10) {
			fields["nested"] = structpb.NewListValue(&structpb.ListValue{})
			exotic = true
		}
		m.DynamicMetadata = &structpb.Struct{Fields: fields}
	}
	return m, nil, exotic
}

// FuzzCheckResponseEncoder: whatever the answer, the encoder writes
// deterministic proto.Marshal's bytes or declines; it declines an answer
// of a handled shape only when protobuf refuses it too (invalid UTF-8).
func FuzzCheckResponseEncoder(f *testing.F) {
	f.Add(uint32(0), "alice", "acme", "viewer;x,admin", "", int32(0), 0.0)
	f.Add(uint32(2), "policy-deny", "acme", "d-1", "not-owner\nünï", int32(0), 0.0)
	f.Add(uint32(4|1<<4|1<<5|1<<6), "", "", "", strings.Repeat("x", 600), int32(1500), 0.0)
	f.Add(uint32(1<<7), "Zoë", "李", "", "x-svc-a x-svc-b", int32(0), 0.0)
	f.Add(uint32(1|1<<1|1<<2|1<<5|1<<6|1<<8), "k", "v", "\x00\xff", "a,b,c,d,e,f,g,h,i", int32(-1), math.Inf(1))
	f.Add(uint32(1|2<<6|1<<8|1<<10), "", "", "", "", int32(404), math.Copysign(0, -1))
	f.Add(uint32(1|3<<6), "a", "\xff", "c", "body", int32(7), 1.5)
	f.Fuzz(func(t *testing.T, sel uint32, a, b, c, body string, code int32, num float64) {
		m, answer, exotic := fuzzAnswer(sel, a, b, c, body, code, num)
		want, werr := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if answer != nil {
			var enc CheckResponseEncoder
			size, ok := enc.PrepareAnswer(answer)
			if ok != (werr == nil) {
				t.Fatalf("answer encoded: %v; proto.Marshal: %v", ok, werr)
			}
			if ok {
				got := make([]byte, size)
				if err := enc.Encode(got); err != nil {
					t.Fatalf("Encode of the answer: %v", err)
				}
				if string(got) != string(want) {
					t.Fatalf("answer encoding differs from proto.Marshal's\n hand: %x\nproto: %x", got, want)
				}
			}
		}
		var enc CheckResponseEncoder
		size, ok := enc.Prepare(m)
		if !ok {
			if werr == nil && !exotic {
				t.Fatalf("declined an answer proto.Marshal encodes: %v", m)
			}
			return
		}
		if exotic {
			t.Fatalf("encoded an answer it must decline: %v", m)
		}
		got := make([]byte, size)
		if err := enc.Encode(got); err != nil {
			t.Fatalf("Encode: %v", err)
		}
		if werr != nil {
			t.Fatalf("encoded an answer proto.Marshal refuses (%v)", werr)
		}
		back := decodeSame(t, got, want)
		if !math.IsNaN(num) && !proto.Equal(m, back) {
			t.Fatalf("hand encoding decodes to another message:\n%s", cmp.Diff(m, back, protocmp.Transform()))
		}
	})
}

// FuzzValidUTF8: the encoder's check is utf8.ValidString's.
func FuzzValidUTF8(f *testing.F) {
	for n := range 20 {
		s := []byte(strings.Repeat("a", n))
		f.Add(string(s))
		for i := range s {
			for _, c := range []byte{0x80, 0xc3, 0xff} {
				t := append([]byte(nil), s...)
				t[i] = c
				f.Add(string(t))
			}
		}
	}
	f.Add("é✓李 ok")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validUTF8(s), utf8.ValidString(s); got != want {
			t.Fatalf("validUTF8(%q) = %v, want %v", s, got, want)
		}
	})
}
