package e2e

import (
	"errors"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/envoy"
	"github.com/svc-dev/svc/internal/testkit/noopauthz"
	"github.com/svc-dev/svc/reason"
)

// codecAnswers are the answers BenchmarkCompareNoop's load generator
// reads: the no-op's empty OK, the sidecar's allowed answer (headers and
// dynamic metadata) and its refusal.
func codecAnswers(t testing.TB) map[string][]byte {
	t.Helper()
	noop, err := noopauthz.Server{}.Check(t.Context(), &authv3.CheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	allowed := envoy.CheckResponse(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "user-0417", TenantID: "acme"},
		Decision: engine.Decision{Allow: true, DecisionID: "0b7f4d2c9e1a4f3b8c6d5e4f3a2b1c0d", Reason: reason.PolicyAllow},
		Input:    engine.Input{User: policy.User{ID: "user-0417", TenantID: "acme", Roles: []string{"viewer"}}},
	}, nil)
	denied := envoy.CheckResponse(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "user-0417", TenantID: "acme"},
		Decision: engine.Decision{DecisionID: "1c7f4d2c9e1a4f3b8c6d5e4f3a2b1c0d", Reason: reason.PolicyDeny},
	}, nil)
	out := map[string][]byte{}
	for name, m := range map[string]proto.Message{"noop": noop, "sidecar-allowed": allowed, "sidecar-denied": denied} {
		if out[name], err = proto.Marshal(m); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestAnswerCodec: the wire decode takes what proto.Unmarshal takes and
// refuses what it refuses, reads an OK answer's code, and decodes a
// refusal in full so that a failing run shows its body.
func TestAnswerCodec(t *testing.T) {
	answers := codecAnswers(t)
	wireCodec := answerCodec{mode: decodeWire}
	for name, b := range answers {
		var want, got authv3.CheckResponse
		if err := proto.Unmarshal(b, &want); err != nil {
			t.Fatalf("%s: proto.Unmarshal: %v", name, err)
		}
		if err := wireCodec.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.GetStatus().GetCode() != want.GetStatus().GetCode() {
			t.Errorf("%s: code %d, want %d", name, got.GetStatus().GetCode(), want.GetStatus().GetCode())
		}
		if want.GetStatus().GetCode() != 0 && !proto.Equal(&got, &want) {
			t.Errorf("%s: a refusal decodes to %v, want %v", name, &got, &want)
		}
		// Every cut of the answer, and every byte changed in turn: the
		// codec errs exactly where proto.Unmarshal does.
		for i := range len(b) {
			agree(t, name+" cut", b[:i])
			for _, v := range []byte{0x00, 0x7f, 0x80, 0xff} {
				c := append([]byte(nil), b...)
				c[i] = v
				agree(t, name+" changed", c)
			}
		}
	}
	if err := (answerCodec{mode: decodeWire}).Unmarshal(answers["noop"], new(authv3.CheckRequest)); err != nil {
		t.Errorf("another message type: %v", err)
	}
}

func agree(t *testing.T, name string, b []byte) {
	t.Helper()
	wantErr := proto.Unmarshal(b, new(authv3.CheckResponse))
	gotErr := answerCodec{mode: decodeWire}.Unmarshal(b, new(authv3.CheckResponse))
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("%s % x: codec error %v, proto.Unmarshal's %v", name, b, gotErr, wantErr)
	}
	if gotErr != nil && wantErr != nil && !errors.Is(gotErr, errMalformed) && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%s: codec error %v", name, gotErr)
	}
}

// BenchmarkAnswerCodec: what reading an answer costs the load generator
// in each mode.
func BenchmarkAnswerCodec(b *testing.B) {
	answers := codecAnswers(b)
	for _, mode := range []string{decodeWire, decodeProto} {
		for _, name := range []string{"noop", "sidecar-allowed"} {
			wire := answers[name]
			b.Run(mode+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				c := answerCodec{mode: mode}
				for b.Loop() {
					var resp authv3.CheckResponse
					if err := c.Unmarshal(wire, &resp); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
