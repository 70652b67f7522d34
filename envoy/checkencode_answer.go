package envoy

import (
	"context"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/svc-dev/svc/engine"
)

// CheckAnswer is the answer to one Check as the Authorization service
// returns it over gRPC: the verdict the CheckResponse is rendered from.
// It is a proto.Message, whose reflection is the complete CheckResponse
// (Response), so that anything handling the gRPC reply sees the answer
// Check returns. A CheckResponseEncoder writes an allowed answer whose
// Response was never asked for straight from the verdict, without
// building the response's messages and the dynamic metadata's map.
type CheckAnswer struct {
	v      verdict
	remove []string // incoming x-svc-* headers to remove from an allowed request

	once  sync.Once
	built atomic.Bool
	resp  *authv3.CheckResponse
}

var _ protoreflect.ProtoMessage = (*CheckAnswer)(nil)

// NewCheckAnswer is the answer CheckResponse renders, as a CheckAnswer.
func NewCheckAnswer(res engine.Result, err error) *CheckAnswer {
	return &CheckAnswer{v: decide(res, err)}
}

// Response returns the answer as the CheckResponse Check returns, built
// on the first call.
func (a *CheckAnswer) Response() *authv3.CheckResponse {
	a.once.Do(func() {
		a.resp = a.v.checkResponseInto(a.remove, nil)
		a.built.Store(true)
	})
	return a.resp
}

// ProtoReflect makes a CheckAnswer a proto.Message: it is Response's.
func (a *CheckAnswer) ProtoReflect() protoreflect.Message { return a.Response().ProtoReflect() }

// authorizationService is the Authorization service of
// authv3.RegisterAuthorizationServer, except that Check replies with a
// *CheckAnswer rather than a *authv3.CheckResponse.
var authorizationService = grpc.ServiceDesc{
	ServiceName: "envoy.service.auth.v3.Authorization",
	HandlerType: (*authv3.AuthorizationServer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Check", Handler: checkHandler}},
	Streams:     []grpc.StreamDesc{},
	Metadata:    "envoy/service/auth/v3/external_auth.proto",
}

// checkHandler decodes a Check and answers it. The request is decoded
// into an IncomingCheck: the sidecar's codec records a request that does
// not decode there (see IncomingCheck), and it is answered with a denied
// CheckResponse; with another codec, gRPC answers it INTERNAL itself.
func checkHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	ic := new(IncomingCheck)
	if err := dec(ic); err != nil {
		return nil, err
	}
	s := srv.(*Server)
	if ic.Err != nil {
		return s.undecodable(ctx, ic.Err, interceptor)
	}
	in := &ic.Request
	if interceptor == nil {
		return s.answer(ctx, in), nil
	}
	if s.checkUnary != nil { // made by New
		return interceptor(ctx, in, &s.checkInfo, s.checkUnary)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: authv3.Authorization_Check_FullMethodName}
	handler := func(ctx context.Context, req any) (any, error) {
		return s.answer(ctx, req.(*authv3.CheckRequest)), nil
	}
	return interceptor(ctx, in, info, handler)
}

// PrepareAnswer is Prepare for a CheckAnswer: an allowed answer whose
// Response was never asked for is sized from its verdict.
func (e *CheckResponseEncoder) PrepareAnswer(a *CheckAnswer) (size int, ok bool) {
	if !a.v.allow || a.v.setCookie != "" || a.built.Load() {
		return e.Prepare(a.Response())
	}
	e.m, e.answer, e.prepared, e.declined, e.n, e.big = nil, a, false, false, 0, nil
	size = e.sizeAllowed(&a.v, a.remove)
	if e.declined {
		// Invalid UTF-8: protobuf's marshaling has the last word.
		return e.Prepare(a.Response())
	}
	e.prepared, e.size = true, size
	return size, true
}

// The fields of an allowed answer, as verdict.okResponse builds them.
const headerAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD

// allowedHeaders are the upstream headers of an allowed answer: the
// first n of hs (x-svc-identity only with a token).
func allowedHeaders(v *verdict) (hs [5][2]string, n int) {
	hs = [5][2]string{
		{HeaderUserID, v.subject},
		{HeaderTenantID, v.tenantID},
		{HeaderRoles, v.roles},
		{HeaderDecisionID, v.decisionID},
		{HeaderIdentity, v.identity},
	}
	if v.identity == "" {
		return hs, 4
	}
	return hs, 5
}

// allowedMetadata is the dynamic metadata in key order.
func allowedMetadata(v *verdict) [4][2]string {
	return [4][2]string{
		{"decision_id", v.decisionID},
		{"reason", string(v.reason)},
		{"subject", v.subject},
		{"tenant_id", v.tenantID},
	}
}

func (e *CheckResponseEncoder) sizeAllowed(v *verdict, remove []string) int {
	ok := 0
	hs, n := allowedHeaders(v)
	for _, h := range hs[:n] {
		hv := e.strSize(h[0])
		if h[1] != "" {
			hv += e.strSize(h[1])
		}
		ok += lenSize(lenSize(hv) + int32Size(int32(headerAction)))
	}
	ok += e.strSize(HeaderFailOpen)
	for _, r := range remove {
		ok += e.strSize(r)
	}
	md := 0
	for _, kv := range allowedMetadata(v) {
		md += lenSize(e.strSize(kv[0]) + lenSize(e.strSize(kv[1])))
	}
	status := 0
	if v.code != 0 {
		status = int32Size(int32(v.code))
	}
	return lenSize(status) + lenSize(md) + lenSize(ok)
}

// allowed writes what sizeAllowed counts: the status, the metadata, then
// the OK response (the oneof, last).
func (w *checkWriter) allowed(v *verdict, remove []string) {
	end := w.i
	for j := len(remove) - 1; j >= 0; j-- {
		w.str(tag(fOKRemove, lenType), remove[j])
	}
	w.str(tag(fOKRemove, lenType), HeaderFailOpen)
	hs, n := allowedHeaders(v)
	for j := n - 1; j >= 0; j-- {
		hEnd := w.i
		w.int32Field(tag(fOptionAction, varintType), int32(headerAction))
		hvEnd := w.i
		if hs[j][1] != "" {
			w.str(tag(fHeaderValue, lenType), hs[j][1])
		}
		w.str(tag(fHeaderKey, lenType), hs[j][0])
		w.lenTag(tag(fOptionHeader, lenType), hvEnd)
		w.lenTag(tag(fOKHeaders, lenType), hEnd)
	}
	w.lenTag(tag(fOK, lenType), end)

	end = w.i
	md := allowedMetadata(v)
	for j := len(md) - 1; j >= 0; j-- {
		eEnd := w.i
		w.str(tag(fString, lenType), md[j][1])
		w.lenTag(tag(fEntryValue, lenType), eEnd)
		w.str(tag(fEntryKey, lenType), md[j][0])
		w.lenTag(tag(fStructFields, lenType), eEnd)
	}
	w.lenTag(tag(fMetadata, lenType), end)

	end = w.i
	if v.code != 0 {
		w.int32Field(tag(fStatusCode, varintType), int32(v.code))
	}
	w.lenTag(tag(fStatus, lenType), end)
}
