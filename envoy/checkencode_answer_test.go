package envoy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// encodeAnswer encodes a with a CheckResponseEncoder.
func encodeAnswer(t testing.TB, a *CheckAnswer) []byte {
	t.Helper()
	var enc CheckResponseEncoder
	size, ok := enc.PrepareAnswer(a)
	if !ok {
		t.Fatalf("encoder declined the answer %v", a.Response())
	}
	buf := make([]byte, size)
	if err := enc.Encode(buf); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	return buf
}

// answerVerdicts are verdicts of every kind, with the headers to remove
// an allowed one is given.
func answerVerdicts() map[string]*CheckAnswer {
	out := map[string]*CheckAnswer{}
	add := func(name string, v verdict, remove []string) {
		out[name] = &CheckAnswer{v: v, remove: remove}
	}
	add("allow", decide(allowedResult("user-417", "acme", []string{"viewer", "x,admin"}, "0b7f4d2c"), nil), nil)
	add("allow empty", decide(allowedResult("", "", nil, ""), nil), nil)
	add("allow non-ascii", decide(allowedResult("Zoë 李", "ténant", []string{"rôle"}, "d-1"), nil), []string{"x-svc-é", ""})
	add("allow long", decide(allowedResult(strings.Repeat("s", 70<<10), "acme", nil, "d-2"), nil), []string{"x-svc-a", "x-svc-b"})
	add("allow invalid UTF-8", decide(allowedResult("a\xffb", "acme", nil, "d-3"), nil), nil)
	add("deny", decide(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "bob"},
		Decision: engine.Decision{Reason: reason.PolicyDeny, DenyReasons: []string{"not-owner"}, DecisionID: "d-5"},
	}, nil), nil)
	add("token missing", decide(engine.Result{Token: engine.TokenDecision{Reason: reason.TokenMissing}}, nil), nil)
	add("invalid input", invalidInput(errors.New("bad"), ""), nil)
	return out
}

// TestCheckAnswerEncoding: a CheckAnswer encodes to deterministic
// proto.Marshal's bytes of its Response, whether the allowed answer is
// written from its verdict (without building the Response) or the
// Response was built first; and the CheckAnswer is, as a proto.Message,
// its Response.
func TestCheckAnswerEncoding(t *testing.T) {
	for name, a := range answerVerdicts() {
		t.Run(name, func(t *testing.T) {
			again := &CheckAnswer{v: a.v, remove: a.remove}
			var enc CheckResponseEncoder
			size, ok := enc.PrepareAnswer(a)
			fromVerdict := ok && !a.built.Load()
			wantVerdict := a.v.allow && name != "allow invalid UTF-8"
			if fromVerdict != wantVerdict {
				t.Errorf("written from the verdict: %v, want %v", fromVerdict, wantVerdict)
			}
			want, err := proto.MarshalOptions{Deterministic: true}.Marshal(again.Response())
			if !ok {
				if err == nil {
					t.Fatal("encoder declined an answer protobuf marshals")
				}
				return
			}
			got := make([]byte, size)
			if err := enc.Encode(got); err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("answer encoding differs from proto.Marshal's\n hand: %x\nproto: %x", got, want)
			}
			if built := encodeAnswer(t, again); string(built) != string(want) {
				t.Errorf("built answer's encoding differs from proto.Marshal's")
			}
			if !proto.Equal(a, again.Response()) {
				t.Errorf("CheckAnswer as a message differs from its Response")
			}
			deterministic := proto.MarshalOptions{Deterministic: true}
			if b, err := deterministic.Marshal(a); err != nil || string(b) != string(want) {
				t.Errorf("proto.Marshal of the CheckAnswer: %v, or other bytes", err)
			}
		})
	}
}

// TestCheckAnswerEncoderAllocs: an allowed answer is sized and written
// from its verdict without an allocation, and without building its
// Response.
func TestCheckAnswerEncoderAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	a := NewCheckAnswer(allowedResult("user-417", "acme", []string{"viewer"}, "0b7f4d2c-8a3e-4c1b"), nil)
	buf := make([]byte, 1024)
	allocs := testing.AllocsPerRun(200, func() {
		var enc CheckResponseEncoder
		size, ok := enc.PrepareAnswer(a)
		if !ok || enc.Encode(buf[:size]) != nil {
			t.Fatal("allowed answer not encoded")
		}
	})
	if allocs > 0 {
		t.Errorf("encoding an allowed answer: %v allocations, want 0", allocs)
	}
	if a.built.Load() {
		t.Error("encoding built the Response")
	}
}

// BenchmarkCheckEncoded measures an allowed Check in process, answer
// encoded, with an authorizer that allows without work: "response"
// builds the CheckResponse Check returns and encodes it, "answer" is the
// gRPC service's path, the CheckAnswer written from its verdict.
func BenchmarkCheckEncoded(b *testing.B) {
	cfg := testConfig(newTestIdP(b), config.FailClosed)
	s := newTestServer(b, cfg, allowWithoutWork)
	req := checkReq("GET", "/api/orders/42", map[string]string{"authorization": "Bearer x", "accept": "application/json"}, nil)
	ctx := context.Background()
	buf := make([]byte, 4096)
	b.Run("response", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, _ := s.Check(ctx, req)
			var enc CheckResponseEncoder
			size, ok := enc.Prepare(resp)
			if !ok || enc.Encode(buf[:size]) != nil {
				b.Fatal("not encoded")
			}
		}
	})
	b.Run("answer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a := s.answer(ctx, req)
			var enc CheckResponseEncoder
			size, ok := enc.PrepareAnswer(a)
			if !ok || enc.Encode(buf[:size]) != nil {
				b.Fatal("not encoded")
			}
		}
	})
}
