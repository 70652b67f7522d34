package sidecar

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// rawCodec sends a []byte as the message's encoding, as it is.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }

func (rawCodec) Name() string { return "proto" }

// TestGRPCUndecodableCounted: a Check whose body does not decode is
// answered INTERNAL before any interceptor, so it has no span and no call
// duration; it is counted on /metrics by its message type.
func TestGRPCUndecodableCounted(t *testing.T) {
	idp := newTestIdP(t)
	r, _ := startTelemetrySidecar(t, idp)
	conn := dial(t, r.GRPCAddr())
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	// Field 1 (attributes), length-delimited, longer than the body.
	body := []byte{0x0a, 0x7f, 0x01}
	err := conn.Invoke(ctx, "/envoy.service.auth.v3.Authorization/Check", body, new([]byte), grpc.ForceCodecV2(rawCodec{}))
	if status.Code(err) != codes.Internal {
		t.Fatalf("undecodable Check answered %v, want INTERNAL", err)
	}
	waitMetric(t, r, `(?m)^svc_grpc_undecodable_requests_total\{[^}]*message="envoy.service.auth.v3.CheckRequest"[^}]*\} 1$`)
	if _, body := get(t, r, PathMetrics); grep(body, "rpc_server_call_duration_seconds_count") != "" {
		t.Errorf("an undecodable Check recorded a call duration:\n%s", grep(body, "rpc_server_call_duration_seconds_count"))
	}
}
