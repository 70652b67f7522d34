package sidecar

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/envoy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

func allowedAnswer() *authv3.CheckResponse { return envoy.CheckResponse(allowedResult(), nil) }

func allowedResult() engine.Result {
	return engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "user-417", TenantID: "acme"},
		Input:    engine.Input{User: policy.User{ID: "user-417", TenantID: "acme", Roles: []string{"viewer"}}},
		Decision: engine.Decision{Allow: true, Reason: reason.PolicyAllow, DecisionID: "0b7f4d2c-8a3e-4c1b-9f6d-2e5a7c9b1d3f"},
	}
}

func deniedAnswer() *authv3.CheckResponse {
	return envoy.CheckResponse(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "bob", TenantID: "acme"},
		Decision: engine.Decision{Reason: reason.PolicyDeny, DenyReasons: []string{"not-owner"}, DecisionID: "d-2"},
	}, nil)
}

// TestCodecEncodesCheckResponses: the codec writes an ext_authz answer
// as deterministic proto.Marshal does, byte for byte, in every buffer
// size; one the hand encoder declines is marshaled as before and decodes
// to the message sent.
func TestCodecEncodesCheckResponses(t *testing.T) {
	declined := allowedAnswer()
	declined.GetOkResponse().QueryParametersToSet = []*corev3.QueryParameter{{Key: "a", Value: "b"}}
	cases := map[string]*authv3.CheckResponse{
		"allowed": allowedAnswer(),
		"denied":  deniedAnswer(),
		"token refused": envoy.CheckResponse(engine.Result{
			Token: engine.TokenDecision{Reason: reason.TokenExpired},
		}, nil),
		"plain buffer": envoy.CheckResponse(engine.Result{
			Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "bob"},
			Decision: engine.Decision{Reason: reason.PolicyDeny, DenyReasons: []string{strings.Repeat("é", 300)}},
		}, nil),
		"pooled buffer": envoy.CheckResponse(engine.Result{
			Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "bob"},
			Decision: engine.Decision{Reason: reason.PolicyDeny, DenyReasons: []string{strings.Repeat("why ", 20<<10)}},
		}, nil),
		"declined": declined,
	}
	c := newCodec()
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			checkCodecMarshal(t, c, m, m, name == "declined")
		})
	}
	// The Authorization service replies with CheckAnswers: written from
	// the verdict, or from the Response once asked for.
	t.Run("answer", func(t *testing.T) {
		checkCodecMarshal(t, c, envoy.NewCheckAnswer(allowedResult(), nil), allowedAnswer(), false)
	})
	t.Run("answer built", func(t *testing.T) {
		a := envoy.NewCheckAnswer(allowedResult(), nil)
		a.Response()
		checkCodecMarshal(t, c, a, allowedAnswer(), false)
	})
	t.Run("answer declined", func(t *testing.T) {
		a := envoy.NewCheckAnswer(allowedResult(), nil)
		a.Response().GetOkResponse().QueryParametersToSet = []*corev3.QueryParameter{{Key: "a", Value: "b"}}
		checkCodecMarshal(t, c, a, a.Response(), true)
	})
}

// checkCodecMarshal marshals v with c: the bytes decode to m and, unless
// declined, are deterministic proto.Marshal's.
func checkCodecMarshal(t *testing.T, c codec, v any, m *authv3.CheckResponse, declined bool) {
	t.Helper()
	data, err := c.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Free()
	got := data.Materialize()
	var back authv3.CheckResponse
	if err := proto.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(m, &back) {
		t.Errorf("decoded answer differs from the one sent")
	}
	if declined {
		return
	}
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("codec wrote %d bytes that differ from deterministic proto.Marshal's %d", len(got), len(want))
	}
}

// TestCodecMarshalCheckAllocs guards the encoding of ext_authz answers by
// the hand encoder, in every build: one allocation, holding the bytes and
// the BufferSlice around them.
func TestCodecMarshalCheckAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	c := newCodec()
	for name, m := range map[string]any{
		"allowed": allowedAnswer(), "denied": deniedAnswer(), "allowed CheckAnswer": envoy.NewCheckAnswer(allowedResult(), nil),
	} {
		allocs := testing.AllocsPerRun(200, func() {
			data, err := c.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			data.Free()
		})
		if allocs > 1 {
			t.Errorf("Marshal of the %s answer: %v allocations, want 1", name, allocs)
		}
	}
}

// BenchmarkCodecMarshalAnswers measures the sidecar codec on an allowed
// and a denied ext_authz answer.
func BenchmarkCodecMarshalAnswers(b *testing.B) {
	c := newCodec()
	for name, m := range map[string]any{
		"allowed": allowedAnswer(), "denied": deniedAnswer(), "allowed CheckAnswer": envoy.NewCheckAnswer(allowedResult(), nil),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, err := c.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				data.Free()
			}
		})
	}
}
