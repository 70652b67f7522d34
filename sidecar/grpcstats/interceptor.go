package grpcstats

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// ServerOptions install the Handler on a gRPC server: its tap handle
// (grpc.InTapHandle; a server has one at most), which looks the
// propagator's keys up in the call's headers as the transport received
// them, and its interceptors, first in the chains. It is what Unary and
// Stream do, without their lookups of the propagator's keys in the
// call's metadata (see extractor.tap).
func (h *Handler) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(h.extract.tap),
		grpc.ChainUnaryInterceptor(h.tappedUnary),
		grpc.ChainStreamInterceptor(h.tappedStream),
	}
}

// Unary is the server's unary interceptor: install it first (outermost),
// so that the span is the parent of what the others and the handler do.
func (h *Handler) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return h.unary(ctx, req, info, handler, false)
}

func (h *Handler) tappedUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return h.unary(ctx, req, info, handler, true)
}

func (h *Handler) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler, tapped bool) (any, error) {
	began := time.Now()
	ctx, span := h.begin(ctx, info.FullMethod, tapped)
	resp, err := handler(ctx, req)
	h.end(ctx, span, info.FullMethod, began, callStatus(ctx, err))
	return resp, err
}

// Stream is the server's stream interceptor, for the streaming methods
// (the health service's Watch, reflection): the span and the duration
// cover the handler, from the stream's start to its end.
func (h *Handler) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return h.stream(srv, ss, info, handler, false)
}

func (h *Handler) tappedStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return h.stream(srv, ss, info, handler, true)
}

func (h *Handler) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler, tapped bool) error {
	began := time.Now()
	ctx, span := h.begin(ss.Context(), info.FullMethod, tapped)
	err := handler(srv, &spanStream{ServerStream: ss, ctx: ctx})
	h.end(ctx, span, info.FullMethod, began, callStatus(ctx, err))
	return err
}

// spanStream is a server stream whose context carries the call's span.
type spanStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *spanStream) Context() context.Context { return s.ctx }

// callStatus is the status gRPC answers a call with when its handler
// returned err, nil for OK: a status error's own, a context's error as
// its code, any other error UNKNOWN, as the server converts them. A
// handler that answered a call whose caller had gone (canceled, past its
// deadline) could not be delivered: the call's context's error is its
// status, as the caller sees it.
func callStatus(ctx context.Context, err error) *status.Status {
	if err == nil {
		if cerr := ctx.Err(); cerr != nil {
			return status.FromContextError(cerr)
		}
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return st
	}
	return status.FromContextError(err)
}
