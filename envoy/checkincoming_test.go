package envoy

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// TestCheckHandlerUndecodable: a request the codec could not decode
// (IncomingCheck.Err) is answered with a denied CheckResponse, 400
// input-invalid, with or without interceptors, which see an empty request;
// the handler never returns the decoding error, which gRPC would send as
// INTERNAL for a fail-open Envoy to pass.
func TestCheckHandlerUndecodable(t *testing.T) {
	s, _ := allowedCheck(t)
	decodeErr := errors.New("proto: string field contains invalid UTF-8")
	dec := func(v any) error {
		v.(*IncomingCheck).Err = decodeErr
		return nil
	}
	var seen []any
	intercept := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		seen = append(seen, req)
		if info.FullMethod != authv3.Authorization_Check_FullMethodName {
			t.Errorf("interceptor told method %q", info.FullMethod)
		}
		return h(ctx, req)
	}
	for name, ic := range map[string]grpc.UnaryServerInterceptor{"direct": nil, "intercepted": intercept} {
		t.Run(name, func(t *testing.T) {
			out, err := checkHandler(s, context.Background(), dec, ic)
			if err != nil {
				t.Fatalf("handler returned error %v, want a denial", err)
			}
			resp := out.(*CheckAnswer).Response()
			d := resp.GetDeniedResponse()
			if codes.Code(resp.GetStatus().GetCode()) != codes.InvalidArgument || d.GetStatus().GetCode() != http.StatusBadRequest {
				t.Fatalf("answer %v, want INVALID_ARGUMENT, 400", resp)
			}
			if !strings.Contains(d.GetBody(), `"reason":"input-invalid"`) || strings.Contains(d.GetBody(), "UTF-8") {
				t.Errorf("deny body %s: want input-invalid and nothing of the decoding error", d.GetBody())
			}
		})
	}
	if len(seen) != 1 || !proto.Equal(seen[0].(*authv3.CheckRequest), new(authv3.CheckRequest)) {
		t.Errorf("interceptor saw %v, want one empty request", seen)
	}
}

// TestIncomingCheckDecodesAsProto: any codec that is not the sidecar's
// decodes an IncomingCheck as the CheckRequest it carries.
func TestIncomingCheckDecodesAsProto(t *testing.T) {
	want := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{Request: &authv3.AttributeContext_Request{
		Http: &authv3.AttributeContext_HttpRequest{Method: "GET", Path: "/orders/1", Headers: map[string]string{"x-a": "b"}},
	}}}
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	ic := new(IncomingCheck)
	if err := proto.Unmarshal(b, ic); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&ic.Request, want) || ic.Err != nil {
		t.Errorf("decoded %v (%v), want %v", &ic.Request, ic.Err, want)
	}
}
