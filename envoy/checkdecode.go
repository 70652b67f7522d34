package envoy

import (
	"bytes"
	"slices"
	"unicode/utf8"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// UnmarshalCheckRequest decodes the wire form of an ext_authz CheckRequest
// into req, as proto.Unmarshal does (req is reset first), with far fewer
// allocations: the messages Envoy sends (attributes, request, http
// request, source and destination peers with their socket addresses,
// the request time, headers, header_map, context extensions) are decoded
// by hand into one block of memory, and every string shares b.
//
// A request holding anything else (metadata contexts, a TLS session, an
// address that is not a socket address, a named port, fields this
// version does not know, invalid UTF-8 or malformed wire data) is decoded
// by proto.Unmarshal instead, so the result and the error are always
// proto.Unmarshal's.
//
// The strings of req point into b: b must never be modified afterwards.
func UnmarshalCheckRequest(b []byte, req *authv3.CheckRequest) error {
	if decodeCheckRequest(b, req) {
		return nil
	}
	return proto.Unmarshal(b, req)
}

// checkBlock holds every message of a usual CheckRequest below the
// request itself, so that they take one allocation.
type checkBlock struct {
	attrs    authv3.AttributeContext
	request  authv3.AttributeContext_Request
	http     authv3.AttributeContext_HttpRequest
	time     timestamppb.Timestamp
	src, dst peerBlock
}

// peerBlock holds a peer and its socket address.
type peerBlock struct {
	peer  authv3.AttributeContext_Peer
	addr  corev3.Address
	oneof corev3.Address_SocketAddress
	sock  corev3.SocketAddress
	port  corev3.SocketAddress_PortValue
}

// wireField is one field as read off the wire: a length-delimited one's
// contents or a varint's value.
type wireField struct {
	num    protowire.Number
	typ    protowire.Type
	bytes  []byte
	varint uint64
}

// nextField reads the field at the start of b; ok is false when b is
// malformed or the field is of a wire type no decoded field has.
func nextField(b []byte) (f wireField, rest []byte, ok bool) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 {
		return f, nil, false
	}
	b = b[n:]
	switch typ {
	case protowire.BytesType:
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return f, nil, false
		}
		f.bytes, b = v, b[m:]
	case protowire.VarintType:
		v, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return f, nil, false
		}
		f.varint, b = v, b[m:]
	default:
		return f, nil, false
	}
	f.num, f.typ = num, typ
	return f, b, true
}

func (f wireField) is(num protowire.Number, typ protowire.Type) bool {
	return f.num == num && f.typ == typ
}

// str is a string field's value, sharing b's memory; ok is false for
// invalid UTF-8, which proto.Unmarshal refuses in proto3 strings.
func str(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", true
	}
	if !utf8.Valid(b) {
		return "", false
	}
	return unsafe.String(&b[0], len(b)), true
}

// decodeCheckRequest decodes b into req; false means proto.Unmarshal must
// decode it (req may then hold a part of b).
func decodeCheckRequest(b []byte, req *authv3.CheckRequest) bool {
	req.Reset()
	var blk *checkBlock
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok || !f.is(1, protowire.BytesType) {
			return false
		}
		b = rest
		if blk == nil {
			blk = new(checkBlock)
			req.Attributes = &blk.attrs
		}
		if !blk.attributes(f.bytes) {
			return false
		}
	}
	return true
}

func (blk *checkBlock) attributes(b []byte) bool {
	a := &blk.attrs
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok || f.typ != protowire.BytesType {
			return false
		}
		b = rest
		switch f.num {
		case 1:
			if a.Source == nil {
				a.Source = &blk.src.peer
			}
			ok = blk.src.decode(f.bytes)
		case 2:
			if a.Destination == nil {
				a.Destination = &blk.dst.peer
			}
			ok = blk.dst.decode(f.bytes)
		case 4:
			if a.Request == nil {
				a.Request = &blk.request
			}
			ok = blk.decodeRequest(f.bytes)
		case 10:
			if a.ContextExtensions == nil {
				a.ContextExtensions = make(map[string]string, countField(b, 10)+1)
			}
			ok = mapEntry(f.bytes, a.ContextExtensions)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

func (blk *checkBlock) decodeRequest(b []byte) bool {
	r := &blk.request
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok || f.typ != protowire.BytesType {
			return false
		}
		b = rest
		switch f.num {
		case 1:
			if r.Time == nil {
				r.Time = &blk.time
			}
			ok = decodeTimestamp(f.bytes, r.Time)
		case 2:
			if r.Http == nil {
				r.Http = &blk.http
			}
			ok = decodeHTTP(f.bytes, r.Http)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

func decodeTimestamp(b []byte, t *timestamppb.Timestamp) bool {
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok {
			return false
		}
		b = rest
		switch {
		case f.is(1, protowire.VarintType):
			t.Seconds = int64(f.varint)
		case f.is(2, protowire.VarintType):
			t.Nanos = int32(f.varint)
		default:
			return false
		}
	}
	return true
}

func decodeHTTP(b []byte, h *authv3.AttributeContext_HttpRequest) bool {
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok {
			return false
		}
		b = rest
		if f.is(9, protowire.VarintType) {
			h.Size = int64(f.varint)
			continue
		}
		if f.typ != protowire.BytesType {
			return false
		}
		var s *string
		switch f.num {
		case 1:
			s = &h.Id
		case 2:
			s = &h.Method
		case 3:
			if h.Headers == nil {
				h.Headers = make(map[string]string, countField(b, 3)+1)
			}
			if !mapEntry(f.bytes, h.Headers) {
				return false
			}
			continue
		case 4:
			s = &h.Path
		case 5:
			s = &h.Host
		case 6:
			s = &h.Scheme
		case 7:
			s = &h.Query
		case 8:
			s = &h.Fragment
		case 10:
			s = &h.Protocol
		case 11:
			s = &h.Body
		case 12:
			h.RawBody = cloneBytes(f.bytes)
			continue
		case 13:
			if h.HeaderMap == nil {
				h.HeaderMap = new(corev3.HeaderMap)
			}
			if !decodeHeaderMap(f.bytes, h.HeaderMap) {
				return false
			}
			continue
		default:
			return false
		}
		if *s, ok = str(f.bytes); !ok {
			return false
		}
	}
	return true
}

// decodeHeaderMap appends the header values of b to m.Headers, all of them
// in one allocation.
func decodeHeaderMap(b []byte, m *corev3.HeaderMap) bool {
	vals := make([]corev3.HeaderValue, countField(b, 1))
	m.Headers = slices.Grow(m.Headers, len(vals))
	n := 0
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok || !f.is(1, protowire.BytesType) {
			return false
		}
		b = rest
		if n == len(vals) { // countField and decoding disagree: not Envoy's doing
			return false
		}
		hv := &vals[n]
		n++
		if !decodeHeaderValue(f.bytes, hv) {
			return false
		}
		m.Headers = append(m.Headers, hv)
	}
	return true
}

func decodeHeaderValue(b []byte, hv *corev3.HeaderValue) bool {
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok || f.typ != protowire.BytesType {
			return false
		}
		b = rest
		switch f.num {
		case 1:
			hv.Key, ok = str(f.bytes)
		case 2:
			hv.Value, ok = str(f.bytes)
		case 3:
			hv.RawValue = cloneBytes(f.bytes)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

func (p *peerBlock) decode(b []byte) bool {
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok || f.typ != protowire.BytesType {
			return false
		}
		b = rest
		switch f.num {
		case 1:
			if p.peer.Address == nil {
				p.peer.Address = &p.addr
			}
			ok = p.decodeAddress(f.bytes)
		case 2:
			p.peer.Service, ok = str(f.bytes)
		case 3:
			if p.peer.Labels == nil {
				p.peer.Labels = make(map[string]string, countField(b, 3)+1)
			}
			ok = mapEntry(f.bytes, p.peer.Labels)
		case 4:
			p.peer.Principal, ok = str(f.bytes)
		case 5:
			p.peer.Certificate, ok = str(f.bytes)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

// decodeAddress decodes an Address whose only member is socket_address.
func (p *peerBlock) decodeAddress(b []byte) bool {
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok || !f.is(1, protowire.BytesType) {
			return false
		}
		b = rest
		if p.addr.Address == nil {
			p.oneof.SocketAddress = &p.sock
			p.addr.Address = &p.oneof
		}
		if !p.decodeSocket(f.bytes) {
			return false
		}
	}
	return true
}

func (p *peerBlock) decodeSocket(b []byte) bool {
	s := &p.sock
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok {
			return false
		}
		b = rest
		switch {
		case f.is(1, protowire.VarintType):
			s.Protocol = corev3.SocketAddress_Protocol(int32(f.varint))
		case f.is(2, protowire.BytesType):
			s.Address, ok = str(f.bytes)
		case f.is(3, protowire.VarintType):
			p.port.PortValue = uint32(f.varint)
			s.PortSpecifier = &p.port
		case f.is(5, protowire.BytesType):
			s.ResolverName, ok = str(f.bytes)
		case f.is(6, protowire.VarintType):
			s.Ipv4Compat = protowire.DecodeBool(f.varint)
		case f.is(7, protowire.BytesType):
			s.NetworkNamespaceFilepath, ok = str(f.bytes)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

// mapEntry decodes one entry of a map<string, string> into m; a repeated
// key keeps its last value, as proto.Unmarshal does.
func mapEntry(b []byte, m map[string]string) bool {
	var k, v string
	for len(b) > 0 {
		f, rest, ok := nextField(b)
		if !ok || f.typ != protowire.BytesType {
			return false
		}
		b = rest
		switch f.num {
		case 1:
			k, ok = str(f.bytes)
		case 2:
			v, ok = str(f.bytes)
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	m[k] = v
	return true
}

// countField counts the length-delimited fields numbered num in b, to size
// a map or a slice once; it stops at the first malformed field, which
// decoding then reports.
func countField(b []byte, num protowire.Number) int {
	n := 0
	for len(b) > 0 {
		got, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			break
		}
		b = b[l:]
		m := protowire.ConsumeFieldValue(got, typ, b)
		if m < 0 {
			break
		}
		b = b[m:]
		if got == num && typ == protowire.BytesType {
			n++
		}
	}
	return n
}

// cloneBytes copies a bytes field, so that no caller can write into the
// memory the strings share; empty stays nil, as proto.Unmarshal leaves it.
func cloneBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}
