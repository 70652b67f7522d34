package e2e

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit/rawcodec"
)

// notUTF8 stands, in a request marshaled by proto-go, for a byte that is
// not UTF-8: proto-go refuses to marshal one in a string field, so the
// request is marshaled with this marker and the marker's last byte is
// replaced on the wire (same length, so the encoding stays well formed).
const notUTF8 = "\x1fmark\x1f"

// rawCheck sends the wire form of a Check to the sidecar as it is and
// decodes the answer; err is the gRPC error, if the call got one.
func rawCheck(t *testing.T, s *harness.Sidecar, wire []byte) (*authv3.CheckResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	var out []byte
	err := s.Conn(t).Invoke(ctx, authv3.Authorization_Check_FullMethodName, wire, &out, grpc.ForceCodecV2(rawcodec.Codec{}))
	if err != nil {
		return nil, err
	}
	resp := new(authv3.CheckResponse)
	if err := proto.Unmarshal(out, resp); err != nil {
		t.Fatalf("the answer is not a CheckResponse: %v", err)
	}
	return resp, nil
}

// withoutUTF8 marshals req and turns each notUTF8 marker into a string
// that ends in byte 0xE9 (Latin-1 "é", not UTF-8 on its own).
func withoutUTF8(t *testing.T, req *authv3.CheckRequest) []byte {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(notUTF8)) {
		t.Fatal("the request holds no marker")
	}
	bad := []byte(notUTF8)
	bad[len(bad)-1] = 0xe9
	return bytes.ReplaceAll(b, []byte(notUTF8), bad)
}

// checkRequest is a viewer's GET /orders/1 as Envoy sends it, with the
// headers in the map (encode_raw_headers false) or in header_map.
func checkRequest(headers map[string]string, headerMap []*corev3.HeaderValue) *authv3.CheckRequest {
	h := &authv3.AttributeContext_HttpRequest{
		Id: "req-1", Method: "GET", Path: "/orders/1", Host: "api.example.test", Scheme: "https", Protocol: "HTTP/1.1",
		Headers: headers,
	}
	if headerMap != nil {
		h.HeaderMap = &corev3.HeaderMap{Headers: headerMap}
	}
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{Http: h}}}
}

// TestEnvoyUndecodableCheckDenied: a Check whose header value is not
// UTF-8 cannot be decoded (proto3 strings are UTF-8). The sidecar binary
// answers it with a denied CheckResponse (INVALID_ARGUMENT, HTTP 400,
// input-invalid), never a gRPC error, which an Envoy with
// failure_mode_allow: true would take for an outage and let the request
// through. The same bytes in header_map's raw_value, where Envoy puts them
// with encode_raw_headers, are read and decided.
func TestEnvoyUndecodableCheckDenied(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	viewer := "Bearer " + k.token(t, "u-viewer", "acme", "viewer")

	for _, tc := range []struct {
		name    string
		headers map[string]string
	}{
		{"a header value", map[string]string{"authorization": viewer, "x-name": "caf" + notUTF8}},
		{"the authorization header", map[string]string{"authorization": viewer + notUTF8}},
		{"a header name", map[string]string{"authorization": viewer, "x-" + notUTF8: "1"}},
	} {
		t.Run("not UTF-8 in "+tc.name, func(t *testing.T) {
			resp, err := rawCheck(t, s, withoutUTF8(t, checkRequest(tc.headers, nil)))
			if err != nil {
				t.Fatalf("answered with a gRPC error, which a fail-open Envoy passes: %v", err)
			}
			d := resp.GetDeniedResponse()
			if resp.GetStatus().GetCode() != int32(code.Code_INVALID_ARGUMENT) || d == nil || d.GetStatus().GetCode() != http.StatusBadRequest {
				t.Fatalf("answer %v, want a denial: INVALID_ARGUMENT, HTTP 400", resp)
			}
			if deny := parseDeny(t, d.GetBody()); deny.Reason != "input-invalid" {
				t.Errorf("deny body %s, want reason input-invalid", d.GetBody())
			}
			if resp.GetOkResponse() != nil {
				t.Error("a denial with an OK response")
			}
		})
	}

	t.Run("raw bytes in header_map are decided", func(t *testing.T) {
		req := checkRequest(nil, []*corev3.HeaderValue{
			{Key: "authorization", RawValue: []byte(viewer)},
			{Key: "x-name", RawValue: []byte("caf\xe9")},
		})
		// raw_value is bytes: proto-go marshals any byte there.
		wire, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rawCheck(t, s, wire)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if resp.GetStatus().GetCode() != int32(code.Code_OK) || resp.GetOkResponse() == nil {
			t.Fatalf("answer %v, want the viewer's GET allowed", resp)
		}
	})

	// The sidecar still answers ordinary checks.
	if r := envoyCheck(t, s, "DELETE", "/orders/1", strings.TrimPrefix(viewer, "Bearer "), nil); r.status != http.StatusForbidden {
		t.Errorf("viewer's DELETE afterwards: %d, want 403", r.status)
	}
}
