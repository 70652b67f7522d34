package sidecar

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/envoy"
	"github.com/svc-dev/svc/internal/testkit/rawcodec"
)

// nonUTF8HeaderCheck is the wire form of a Check for GET /orders/1 whose
// header x-name holds a byte that is not UTF-8: proto-go refuses to
// marshal it, so it is written field by field.
func nonUTF8HeaderCheck() []byte {
	msg := func(num protowire.Number, parts ...[]byte) []byte {
		var body []byte
		for _, p := range parts {
			body = append(body, p...)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), body)
	}
	str := func(num protowire.Number, s string) []byte { return msg(num, []byte(s)) }
	entry := msg(3, str(1, "x-name"), str(2, "caf\xe9"))
	http := msg(2, str(2, "GET"), entry, str(4, "/orders/1"), str(5, "api.example.test"))
	return msg(1, msg(4, http))
}

// TestGRPCUndecodableCheckDenied: a Check whose body does not decode is
// answered with a denied CheckResponse (400, input-invalid), never a gRPC
// error that an Envoy with failure_mode_allow would let through. It is
// counted on /metrics by its message type and, like every answered call,
// has a call duration.
func TestGRPCUndecodableCheckDenied(t *testing.T) {
	idp := newTestIdP(t)
	r, _ := startTelemetrySidecar(t, idp)
	conn := dial(t, r.GRPCAddr())
	for i, tc := range []struct {
		name string
		body []byte
	}{
		// Field 1 (attributes), length-delimited, longer than the body.
		{"truncated", []byte{0x0a, 0x7f, 0x01}},
		{"header value not UTF-8", nonUTF8HeaderCheck()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "header value not UTF-8" {
				if err := proto.Unmarshal(tc.body, new(authv3.CheckRequest)); err == nil {
					t.Fatal("the test request decodes: it no longer tests an undecodable one")
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			var out []byte
			err := conn.Invoke(ctx, "/envoy.service.auth.v3.Authorization/Check", tc.body, &out, grpc.ForceCodecV2(rawcodec.Codec{}))
			if err != nil {
				t.Fatalf("undecodable Check answered with a gRPC error: %v", err)
			}
			resp := new(authv3.CheckResponse)
			if err := proto.Unmarshal(out, resp); err != nil {
				t.Fatalf("answer is not a CheckResponse: %v", err)
			}
			d := resp.GetDeniedResponse()
			if resp.GetStatus().GetCode() != int32(code.Code_INVALID_ARGUMENT) || d == nil || d.GetStatus().GetCode() != http.StatusBadRequest {
				t.Fatalf("answer %v, want a denial: INVALID_ARGUMENT, HTTP 400", resp)
			}
			if want := `"reason":"input-invalid"`; !strings.Contains(d.GetBody(), want) {
				t.Errorf("deny body %s lacks %s", d.GetBody(), want)
			}
			if got := resp.GetDynamicMetadata().GetFields()["reason"].GetStringValue(); got != "input-invalid" {
				t.Errorf("metadata reason %q, want input-invalid", got)
			}
			for _, h := range d.GetHeaders() {
				if h.GetHeader().GetKey() == envoy.HeaderUserID {
					t.Errorf("a denial carries %s", envoy.HeaderUserID)
				}
			}
			waitMetric(t, r, `(?m)^svc_grpc_undecodable_requests_total\{[^}]*message="envoy.service.auth.v3.CheckRequest"[^}]*\} `+strconv.Itoa(i+1)+`$`)
		})
	}
	if _, body := get(t, r, PathMetrics); grep(body, "rpc_server_call_duration_seconds_count") == "" {
		t.Error("the refused Checks recorded no call duration")
	}
}
