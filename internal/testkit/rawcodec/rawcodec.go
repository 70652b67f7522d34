// Package rawcodec is a gRPC codec for tests that send bytes no protobuf
// library would marshal (a proto3 string that is not UTF-8, truncated
// wire data) and read the answer's bytes as they came.
package rawcodec

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// Codec sends a []byte as the message's encoding, unchanged, and decodes
// an answer into a *[]byte. Its name is "proto", the wire format servers
// expect: use it per call with grpc.ForceCodecV2.
type Codec struct{}

var _ encoding.CodecV2 = Codec{}

// Marshal returns v, a []byte, as the encoding.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("rawcodec: marshal %T, want []byte", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

// Unmarshal copies the encoding into v, a *[]byte.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawcodec: unmarshal into %T, want *[]byte", v)
	}
	*p = data.Materialize()
	return nil
}

// Name is the proto codec's.
func (Codec) Name() string { return "proto" }
