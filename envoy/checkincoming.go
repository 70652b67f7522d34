package envoy

import (
	"context"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svc-dev/svc/reason"
)

// IncomingCheck is a Check's request as the Authorization service receives
// it over gRPC: the CheckRequest, or why it did not decode. gRPC answers a
// codec's decoding error itself, with INTERNAL, before any handler can
// answer otherwise, and an Envoy with failure_mode_allow: true lets the
// request through on INTERNAL as on an outage. So a codec that knows this
// type (the sidecar's) decodes into Request and, when that fails (a header
// value that is not UTF-8, which proto3 strings must be; malformed wire
// data), records the failure in Err and returns none: Check then answers
// a denied CheckResponse (400, input-invalid).
//
// IncomingCheck is a proto.Message whose reflection is Request's, so that
// any other codec decodes it as the CheckRequest it carries.
type IncomingCheck struct {
	Request authv3.CheckRequest
	// Err is why Request did not decode; Request is then empty.
	Err error
}

var _ protoreflect.ProtoMessage = (*IncomingCheck)(nil)

// ProtoReflect makes an IncomingCheck a proto.Message: it is Request's.
func (c *IncomingCheck) ProtoReflect() protoreflect.Message { return c.Request.ProtoReflect() }

// undecodable answers a Check whose request did not decode: 400 with
// reason input-invalid, recorded under a decision id (refuse), through
// the interceptors like any other answer, so that the call has its span
// and duration. They are handed an empty request: what did decode of the
// refused one is not to be trusted. The decoding error itself is not
// logged: it can quote the request's bytes.
func (s *Server) undecodable(ctx context.Context, err error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	refused := reason.Wrap(reason.InputInvalid, err,
		"the check request cannot be decoded (a header value that is not UTF-8?); Envoy sends such bytes as '!' unless encode_raw_headers is true, and then in header_map as raw bytes")
	answer := func(ctx context.Context, _ any) (any, error) {
		return &CheckAnswer{v: s.present(s.refuse(ctx, SourceEnvoy, proxyRequest{}, refused), proxyRequest{}, "")}, nil
	}
	if interceptor == nil {
		return answer(ctx, nil)
	}
	info := &s.checkInfo
	if info.FullMethod == "" { // a Server not made by New
		info = &grpc.UnaryServerInfo{Server: s, FullMethod: authv3.Authorization_Check_FullMethodName}
	}
	return interceptor(ctx, new(authv3.CheckRequest), info, answer)
}
