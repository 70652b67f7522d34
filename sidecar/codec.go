package sidecar

import (
	"fmt"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/svc-dev/svc/envoy"
)

// vtMessage is a message with vtprotobuf's generated marshaling:
// go-control-plane's Envoy messages (CheckResponse among them) have it
// when the module is built with -tags vtprotobuf, as `make build` and the
// image do.
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVTStrict(dAtA []byte) (int, error)
}

// codec is gRPC's proto codec, except that ext_authz answers are encoded
// by envoy.CheckResponseEncoder straight from their fields (one walk of
// the dynamic metadata's map, sorted keys), other messages with generated
// vtprotobuf methods by them rather than by protobuf's reflection, which
// costs an ext_authz answer several microseconds of sizing and encoding
// (as do the answers the encoder declines), and that ext_authz requests
// are decoded by
// envoy.UnmarshalCheckRequest, which go-control-plane's generated code
// lacks (reflection takes some twenty allocations for a request with a
// few headers, the hand decoder four). Both decode to the same message.
type codec struct {
	proto encoding.CodecV2
	// undecodable, when set, counts a request that did not decode: gRPC
	// answers it INTERNAL before any interceptor sees the call, except a
	// Check's, which Check answers with a denial.
	undecodable func(v any)
}

var _ encoding.CodecV2 = codec{}

// newCodec wraps the proto codec, which importing grpcproto registers.
func newCodec() codec { return codec{proto: encoding.GetCodecV2(grpcproto.Name)} }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if a, ok := v.(*envoy.CheckAnswer); ok {
		var enc envoy.CheckResponseEncoder
		if size, ok := enc.PrepareAnswer(a); ok {
			out := newOutBuffer(size)
			if err := enc.Encode(out.buf); err != nil {
				out.free()
				return nil, err
			}
			return out.slice, nil
		}
		v = a.Response()
	}
	if r, ok := v.(*authv3.CheckResponse); ok {
		var enc envoy.CheckResponseEncoder
		if size, ok := enc.Prepare(r); ok {
			out := newOutBuffer(size)
			if err := enc.Encode(out.buf); err != nil {
				out.free()
				return nil, err
			}
			return out.slice, nil
		}
	}
	m, ok := v.(vtMessage)
	if !ok {
		return c.proto.Marshal(v)
	}
	out := newOutBuffer(m.SizeVT())
	if err := marshalVT(m, out.buf); err != nil {
		out.free()
		return nil, err
	}
	return out.slice, nil
}

// outBuffer is the memory of one encoded message and the BufferSlice
// that hands it to gRPC.
type outBuffer struct {
	buf   []byte
	slice mem.BufferSlice
}

// newOutBuffer returns a buffer of size bytes from gRPC's default pool;
// gRPC gives it back once the message is written. mem.NewBuffer pools
// only a buffer whose capacity reaches gRPC's pooling threshold (1 KB):
// a smaller message (an allowed answer takes some 300 bytes) takes a
// buffer of that capacity, which spares the garbage collector a buffer
// per answer.
func newOutBuffer(size int) outBuffer {
	pool := mem.DefaultBufferPool()
	buf := pool.Get(max(size, poolableSize))
	*buf = (*buf)[:size]
	return outBuffer{buf: *buf, slice: mem.BufferSlice{mem.NewBuffer(buf, pool)}}
}

// free gives the buffer back when the encoding failed.
func (o outBuffer) free() { o.slice.Free() }

// poolableSize is the smallest capacity mem.NewBuffer pools.
var poolableSize = func() int {
	n := 1
	for mem.IsBelowBufferPoolingThreshold(n) {
		n *= 2
	}
	return n
}()

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

// Unmarshal decodes a message. A Check's request that does not decode
// is not an error here: it is recorded in the envoy.IncomingCheck, and
// Check answers it with a denial (gRPC would answer the error INTERNAL,
// which a fail-open Envoy lets through).
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	var err error
	switch m := v.(type) {
	case *envoy.IncomingCheck:
		if m.Err = unmarshalCheck(data, &m.Request); m.Err != nil {
			m.Request.Reset()
			c.countUndecodable(&m.Request)
		}
		return nil
	case *authv3.CheckRequest:
		err = unmarshalCheck(data, m)
	default:
		err = c.proto.Unmarshal(data, v)
	}
	if err != nil {
		c.countUndecodable(v)
	}
	return err
}

// unmarshalCheck decodes an ext_authz request. Materialize copies it into
// memory of its own, which nothing writes to again: its strings can
// share it.
func unmarshalCheck(data mem.BufferSlice, req *authv3.CheckRequest) error {
	return envoy.UnmarshalCheckRequest(data.Materialize(), req)
}

func (c codec) countUndecodable(v any) {
	if c.undecodable != nil {
		c.undecodable(v)
	}
}

// Name is the proto codec's: the wire format is the same.
func (codec) Name() string { return grpcproto.Name }
