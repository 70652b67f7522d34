package sidecar

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// vtMessage is a message with vtprotobuf's generated marshaling:
// go-control-plane's Envoy messages (CheckResponse among them) have it
// when the module is built with -tags vtprotobuf, as `make build` and the
// image do.
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVTStrict(dAtA []byte) (int, error)
}

// codec is gRPC's proto codec, except that messages with generated
// vtprotobuf methods are marshaled by them rather than by protobuf's
// reflection, which costs an ext_authz answer several microseconds of
// sizing and encoding. The bytes decode to the same message; unmarshaling
// is always the proto codec's.
type codec struct {
	proto encoding.CodecV2
}

var _ encoding.CodecV2 = codec{}

// newCodec wraps the proto codec, which importing grpcproto registers.
func newCodec() codec { return codec{proto: encoding.GetCodecV2(grpcproto.Name)} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(vtMessage)
	if !ok {
		return c.proto.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if err := marshalVT(m, buf); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if err := marshalVT(m, (*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, err
	}
	*buf = (*buf)[:size]
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// marshalVT fills buf, sized by SizeVT, from its end, as the generated
// code does.
func marshalVT(m vtMessage, buf []byte) error {
	n, err := m.MarshalToSizedBufferVTStrict(buf)
	if err != nil {
		return fmt.Errorf("proto: marshal %T: %w", m, err)
	}
	if n != len(buf) {
		return fmt.Errorf("proto: marshal %T: wrote %d bytes of %d", m, n, len(buf))
	}
	return nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

// Name is the proto codec's: the wire format is the same.
func (codec) Name() string { return grpcproto.Name }
