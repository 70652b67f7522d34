//go:build vtprotobuf

package sidecar

import (
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/envoy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// Built with -tags vtprotobuf, the ext_authz answer has the generated
// marshaling the codec looks for.
var _ vtMessage = (*authv3.CheckResponse)(nil)

// TestCodecMarshalAllocs guards the encoding of an allowed answer: one
// allocation, holding the bytes and the BufferSlice around them.
func TestCodecMarshalAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	resp := envoy.CheckResponse(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "user-417", TenantID: "acme"},
		Input:    engine.Input{User: policy.User{ID: "user-417", TenantID: "acme", Roles: []string{"viewer"}}},
		Decision: engine.Decision{Allow: true, Reason: reason.PolicyAllow, DecisionID: "0b7f4d2c-8a3e-4c1b-9f6d-2e5a7c9b1d3f"},
	}, nil)
	c := newCodec()
	allocs := testing.AllocsPerRun(200, func() {
		data, err := c.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		data.Free()
	})
	if allocs > 1 {
		t.Errorf("Marshal of an allowed answer: %v allocations, want 1", allocs)
	}
}
