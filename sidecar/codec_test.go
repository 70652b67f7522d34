package sidecar

import (
	"errors"
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/envoy"
	"github.com/svc-dev/svc/reason"
)

// vtStub gives a message the vtprotobuf methods (by way of proto.Marshal),
// so that the codec's generated-code path runs in builds without the
// vtprotobuf tag too; lie makes it report a wrong size.
type vtStub struct {
	proto.Message
	lie int
}

func (m vtStub) SizeVT() int { return proto.Size(m.Message) + m.lie }

func (m vtStub) MarshalToSizedBufferVTStrict(buf []byte) (int, error) {
	b, err := proto.Marshal(m.Message)
	if err != nil {
		return 0, err
	}
	if len(b) > len(buf) {
		return 0, errors.New("buffer too small")
	}
	return copy(buf[len(buf)-len(b):], b), nil
}

// TestCodecMarshalsAsProto checks that every answer the codec encodes
// decodes to the message it was given, whichever path encoded it: the
// ext_authz answers (with the generated methods when built with
// -tags vtprotobuf), a message without them, one large enough for pooled
// buffers.
func TestCodecMarshalsAsProto(t *testing.T) {
	allowed := envoy.CheckResponse(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "alice", TenantID: "acme"},
		Input:    engine.Input{User: policy.User{ID: "alice", TenantID: "acme", Roles: []string{"viewer", "x,admin"}}},
		Decision: engine.Decision{Allow: true, Reason: reason.PolicyAllow, DecisionID: "d-1"},
	}, nil)
	denied := envoy.CheckResponse(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "bob", TenantID: "acme"},
		Decision: engine.Decision{Reason: reason.PolicyDeny, DenyReasons: []string{"not-owner"}, DecisionID: "d-2"},
	}, nil)
	large := envoy.CheckResponse(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: strings.Repeat("s", 64<<10), TenantID: "acme"},
		Input:    engine.Input{User: policy.User{ID: strings.Repeat("s", 64<<10), TenantID: "acme"}},
		Decision: engine.Decision{Allow: true, Reason: reason.PolicyAllow, DecisionID: "d-3"},
	}, nil)
	cases := []struct {
		name string
		msg  any
		want proto.Message
	}{
		{"allowed check", allowed, allowed},
		{"denied check", denied, denied},
		{"pooled buffer", large, large},
		{"without generated methods", &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}},
		{"generated methods", vtStub{Message: allowed}, allowed},
		{"generated methods, pooled buffer", vtStub{Message: large}, large},
	}
	c := newCodec()
	if c.Name() != grpcproto.Name {
		t.Fatalf("Name() = %q, want %q", c.Name(), grpcproto.Name)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := c.Marshal(tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			defer data.Free()
			got := tc.want.ProtoReflect().New().Interface()
			if err := encoding.GetCodecV2(grpcproto.Name).Unmarshal(data, got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("decoded answer differs (-sent +decoded):\n%s", diff)
			}
			// And the codec decodes what it is sent, as the proto codec does.
			again := tc.want.ProtoReflect().New().Interface()
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data.Materialize())}, again); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, again, protocmp.Transform()); diff != "" {
				t.Errorf("codec's own decoding differs (-sent +decoded):\n%s", diff)
			}
		})
	}
}

// TestCodecRefusesShortWrite: generated code that writes fewer bytes than
// it sized is an error, never a truncated answer on the wire.
func TestCodecRefusesShortWrite(t *testing.T) {
	for _, lie := range []int{1, 64 << 10} {
		msg := vtStub{Message: &authv3.CheckResponse{}, lie: lie}
		if _, err := newCodec().Marshal(msg); err == nil {
			t.Errorf("size off by %d: Marshal succeeded, want an error", lie)
		}
	}
}

// BenchmarkCodecMarshal measures the encoding of an allowed ext_authz
// answer by gRPC's proto codec and by the sidecar's codec (which uses the
// generated marshaling only when built with -tags vtprotobuf).
func BenchmarkCodecMarshal(b *testing.B) {
	resp := envoy.CheckResponse(engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "user-417", TenantID: "acme"},
		Input:    engine.Input{User: policy.User{ID: "user-417", TenantID: "acme", Roles: []string{"viewer"}}},
		Decision: engine.Decision{Allow: true, Reason: reason.PolicyAllow, DecisionID: "0b7f4d2c-8a3e-4c1b-9f6d-2e5a7c9b1d3f"},
	}, nil)
	for _, bc := range []struct {
		name  string
		codec encoding.CodecV2
	}{
		{"proto", encoding.GetCodecV2(grpcproto.Name)},
		{"sidecar", newCodec()},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				data, err := bc.codec.Marshal(resp)
				if err != nil {
					b.Fatal(err)
				}
				data.Free()
			}
		})
	}
}

// TestCodecUnmarshalsCheckRequest: the codec's own decoding of ext_authz
// requests gives proto.Unmarshal's message and errors, whether gRPC hands
// the request over in one buffer or in several, and the request keeps its
// values when gRPC reuses the buffers afterwards.
func TestCodecUnmarshalsCheckRequest(t *testing.T) {
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "GET", Path: "/orders/7", Host: "api.example",
			Headers: map[string]string{"authorization": "Bearer a.b.c", "user-agent": "test"},
		}},
		ContextExtensions: map[string]string{envoy.ExtAction: "orders:read"},
	}}
	wire, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	c := newCodec()
	for _, split := range []int{0, 1, len(wire) / 2, len(wire) - 1} {
		first, second := append([]byte(nil), wire[:split]...), append([]byte(nil), wire[split:]...)
		data := mem.BufferSlice{mem.SliceBuffer(first), mem.SliceBuffer(second)}
		var got authv3.CheckRequest
		if err := c.Unmarshal(data, &got); err != nil {
			t.Fatalf("split at %d: %v", split, err)
		}
		clear(first)
		clear(second)
		if diff := cmp.Diff(req, &got, protocmp.Transform()); diff != "" {
			t.Errorf("split at %d: decoded request differs (-sent +decoded):\n%s", split, diff)
		}
	}
	var got authv3.CheckRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire[:len(wire)-2])}, &got); err == nil {
		t.Error("a truncated request decoded without error")
	}
}

// TestCodecMarshalSizes: every size of encoding, around the bounds of the
// pool's tiers and of the capacity gRPC pools, gives proto.Marshal's
// bytes.
func TestCodecMarshalSizes(t *testing.T) {
	c := newCodec()
	for _, size := range []int{0, 1, 255, 256, 257, 1023, 1024, 1025, poolableSize, poolableSize + 1, 4096, 4097} {
		// A CheckResponse of one status message: 2 or 3 bytes of tags and
		// lengths around the text.
		resp := &authv3.CheckResponse{}
		for n := max(0, size-8); proto.Size(resp) < size; n++ {
			resp = &authv3.CheckResponse{Status: &rpcstatus.Status{Message: strings.Repeat("m", n)}}
		}
		want, err := proto.Marshal(resp)
		if err != nil {
			t.Fatal(err)
		}
		data, err := c.Marshal(vtStub{Message: resp})
		if err != nil {
			t.Fatalf("size %d: %v", len(want), err)
		}
		if got := data.Materialize(); string(got) != string(want) {
			t.Errorf("size %d: codec wrote %d bytes that differ from proto.Marshal's", len(want), len(got))
		}
		data.Free()
	}
}
