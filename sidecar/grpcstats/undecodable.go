package grpcstats

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/protobuf/proto"
)

// CountUndecodable counts a request whose message v did not decode. gRPC
// answers most of them INTERNAL before any interceptor, so neither a span
// nor the call duration records them; an ext_authz Check is answered with
// a denial through the interceptors, and counted here too. The server's codec calls it when its
// Unmarshal fails. The count's attribute is the message's type (the
// method's request type, one of a bounded set), never its content.
func (h *Handler) CountUndecodable(v any) {
	h.undecodable.Add(context.Background(), 1, metric.WithAttributes(attribute.String("message", messageType(v))))
}

// messageType is the full name of v's protobuf message type.
func messageType(v any) string {
	if m, ok := v.(proto.Message); ok && m != nil {
		return string(m.ProtoReflect().Descriptor().FullName())
	}
	return "unknown"
}
