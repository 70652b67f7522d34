package e2e

import (
	"errors"
	"fmt"
	"unicode/utf8"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Client decodes of BenchmarkCompareNoop's load generator (flag
// -compare.client-decode).
const (
	// decodeWire reads an answer as Envoy's C++ parser does, field by
	// field against the CheckResponse schema, strings checked for UTF-8,
	// without building Go messages: what the client spends then barely
	// depends on how rich the answer is, as in Envoy, where a Go
	// client's reflection decode and its garbage cost more for the
	// sidecar's headers and metadata than the server spent writing them.
	decodeWire = "wire"
	// decodeProto builds every answer's Go messages with proto.Unmarshal.
	decodeProto = "proto"
)

// answerCodec is the load generator's gRPC codec: requests marshalled
// by protobuf, answers decoded as its mode says. A well-formed answer
// that is not OK is always decoded in full, so that a failure shows it.
type answerCodec struct{ mode string }

func (answerCodec) Name() string { return "proto" }

func (answerCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("answerCodec: %T is no protobuf message", v)
	}
	return proto.Marshal(m)
}

// okStatus is the Status of every OK answer read in decodeWire mode; no
// caller writes to it.
var okStatus = &rpcstatus.Status{}

func (c answerCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("answerCodec: %T is no protobuf message", v)
	}
	resp, isAnswer := v.(*authv3.CheckResponse)
	if !isAnswer || c.mode != decodeWire {
		return proto.Unmarshal(data, m)
	}
	if err := walkMessage(data, resp.ProtoReflect().Descriptor(), 0); err != nil {
		return err
	}
	if answerCode(data) != 0 {
		return proto.Unmarshal(data, resp)
	}
	resp.Reset()
	resp.Status = okStatus
	return nil
}

var errMalformed = errors.New("answerCodec: malformed answer")

// walkMessage checks that b is a well-formed encoding of md: every field
// whole, every known string valid UTF-8, every known message field
// walked in turn.
func walkMessage(b []byte, md protoreflect.MessageDescriptor, depth int) error {
	if depth > 64 {
		return errMalformed
	}
	fields := md.Fields()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errMalformed
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return errMalformed
		}
		b = b[n:]
		fd := fields.ByNumber(num)
		if fd == nil {
			continue
		}
		switch fd.Kind() {
		case protoreflect.MessageKind:
			if err := walkMessage(v, fd.Message(), depth+1); err != nil {
				return err
			}
		case protoreflect.StringKind:
			if !utf8.Valid(v) {
				return errMalformed
			}
		}
	}
	return nil
}

// answerCode is the status code of a CheckResponse that walkMessage
// found well-formed: field 1 of its field 1, 0 when absent (the last
// occurrence wins, as in protobuf).
func answerCode(b []byte) int32 {
	var code int32
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			b = b[protowire.ConsumeFieldValue(num, typ, b):]
			continue
		}
		st, n := protowire.ConsumeBytes(b)
		b = b[n:]
		for len(st) > 0 {
			num, typ, n := protowire.ConsumeTag(st)
			st = st[n:]
			if num == 1 && typ == protowire.VarintType {
				c, n := protowire.ConsumeVarint(st)
				code = int32(c)
				st = st[n:]
				continue
			}
			st = st[protowire.ConsumeFieldValue(num, typ, st):]
		}
	}
	return code
}
