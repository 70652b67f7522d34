package envoy

import (
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"
)

// CheckResponseEncoder writes the wire form of an ext_authz CheckResponse
// straight from its fields, the mirror of UnmarshalCheckRequest: the
// bytes are deterministic proto.Marshal's (fields in number order, a
// oneof's after the others, the dynamic metadata's keys sorted), without
// protobuf's reflection and walking the metadata map once, where
// vtprotobuf's generated code walks it twice, in an order that changes
// every time.
//
// It handles the answers the sidecar gives: a google.rpc status without
// details; a denied response (HTTP status, headers, body), an error
// response (the same) or an OK response (headers, headers to remove,
// response headers to add, query parameters to remove); dynamic metadata
// of string, number, bool or null values. Prepare declines anything else
// (query parameters to set, the OK response's deprecated dynamic
// metadata, nested structs or lists, nil elements, unknown fields,
// invalid UTF-8), which the caller then marshals as it would have
// without the encoder.
//
// Prepare sizes a message, Encode writes it; the message must not change
// in between. The zero value is ready; an encoder serves one message at
// a time.
type CheckResponseEncoder struct {
	m        *authv3.CheckResponse
	answer   *CheckAnswer // when the answer is written from its verdict
	prepared bool
	declined bool
	size     int

	// The dynamic metadata's entries sorted by key, read off the map once
	// by Prepare: in small when they fit (n of them), else in big.
	small [8]metaEntry
	n     int
	big   []metaEntry
}

type metaEntry struct {
	key string
	val *structpb.Value
}

// errEncodeChanged: the message changed between Prepare and Encode.
var errEncodeChanged = errors.New("envoy: CheckResponse changed while it was encoded")

// Prepare reads m and returns the size of its encoding; ok is false when
// the encoder does not handle m, which must then be marshaled otherwise.
func (e *CheckResponseEncoder) Prepare(m *authv3.CheckResponse) (size int, ok bool) {
	e.m, e.answer, e.prepared, e.declined, e.n, e.big = m, nil, false, false, 0, nil
	size = e.sizeCheckResponse(m)
	if e.declined {
		return 0, false
	}
	e.prepared, e.size = true, size
	return size, true
}

// Encode writes the message Prepare read into buf, which must be of the
// size Prepare returned.
func (e *CheckResponseEncoder) Encode(buf []byte) (err error) {
	if !e.prepared {
		return errors.New("envoy: Encode of a CheckResponse not prepared")
	}
	if len(buf) != e.size {
		return errors.New("envoy: CheckResponse buffer is not of the prepared size")
	}
	e.prepared = false
	// Every write indexes buf: a message that grew since Prepare runs out
	// of it, which is this error rather than a panic.
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(runtime.Error); !ok {
				panic(r)
			}
			err = errEncodeChanged
		}
	}()
	w := checkWriter{b: buf, i: len(buf), entries: e.entries()}
	if a := e.answer; a != nil {
		w.allowed(&a.v, a.remove)
	} else {
		w.checkResponse(e.m)
	}
	if w.i != 0 {
		return errEncodeChanged
	}
	return nil
}

func (e *CheckResponseEncoder) entries() []metaEntry {
	if e.big != nil {
		return e.big
	}
	return e.small[:e.n]
}

// Field numbers of the messages encoded, each below 16 so that a tag is
// one byte.
const (
	fStatus, fDenied, fOK, fMetadata, fError = 1, 2, 3, 4, 5 // CheckResponse

	fStatusCode, fStatusMessage = 1, 2 // google.rpc.Status

	fDeniedStatus, fDeniedHeaders, fDeniedBody = 1, 2, 3 // DeniedHttpResponse
	fHTTPStatusCode                            = 1       // HttpStatus

	fOKHeaders, fOKMetadata, fOKRemove, fOKResponseHeaders = 2, 3, 5, 6 // OkHttpResponse
	fOKQuerySet, fOKQueryRemove                            = 7, 8

	fOptionHeader, fOptionAppend, fOptionAction, fOptionKeepEmpty = 1, 2, 3, 4 // HeaderValueOption
	fHeaderKey, fHeaderValue, fHeaderRaw                          = 1, 2, 3    // HeaderValue
	fBoolValue                                                    = 1          // BoolValue

	fStructFields, fEntryKey, fEntryValue = 1, 1, 2 // Struct and its map entries
	fNull, fNumber, fString, fBool        = 1, 2, 3, 4
)

// The sizing below decides what the encoder handles: checkwrite.go writes
// exactly the fields it counts.

func (e *CheckResponseEncoder) sizeCheckResponse(m *authv3.CheckResponse) int {
	if m == nil {
		return 0
	}
	e.known(hasUnknown(m, unknownCheckResponse))
	n := 0
	if s := m.Status; s != nil {
		n += lenSize(e.sizeStatus(s))
	}
	if md := m.DynamicMetadata; md != nil {
		n += lenSize(e.sizeMetadata(md))
	}
	switch r := m.HttpResponse.(type) {
	case nil:
	case *authv3.CheckResponse_OkResponse:
		if r == nil || r.OkResponse == nil {
			e.declined = true
			return 0
		}
		n += lenSize(e.sizeOK(r.OkResponse))
	case *authv3.CheckResponse_DeniedResponse:
		if r == nil || r.DeniedResponse == nil {
			e.declined = true
			return 0
		}
		n += lenSize(e.sizeDenied(r.DeniedResponse))
	case *authv3.CheckResponse_ErrorResponse:
		if r == nil || r.ErrorResponse == nil {
			e.declined = true
			return 0
		}
		n += lenSize(e.sizeDenied(r.ErrorResponse))
	default:
		e.declined = true
	}
	return n
}

func (e *CheckResponseEncoder) sizeStatus(s *rpcstatus.Status) int {
	e.known(hasUnknown(s, unknownStatus))
	if len(s.Details) > 0 {
		e.declined = true
	}
	n := 0
	if s.Code != 0 {
		n += int32Size(s.Code)
	}
	if s.Message != "" {
		n += e.strSize(s.Message)
	}
	return n
}

func (e *CheckResponseEncoder) sizeDenied(d *authv3.DeniedHttpResponse) int {
	e.known(hasUnknown(d, unknownDenied))
	n := 0
	if s := d.Status; s != nil {
		e.known(hasUnknown(s, unknownHTTPStatus))
		c := 0
		if s.Code != 0 {
			c = int32Size(int32(s.Code))
		}
		n += lenSize(c)
	}
	n += e.sizeHeaders(d.Headers)
	if d.Body != "" {
		n += e.strSize(d.Body)
	}
	return n
}

func (e *CheckResponseEncoder) sizeOK(ok *authv3.OkHttpResponse) int {
	e.known(hasUnknown(ok, unknownOK))
	//lint:ignore SA1019 a deprecated field set is declined, not dropped
	if len(ok.QueryParametersToSet) > 0 || ok.DynamicMetadata != nil {
		e.declined = true
	}
	n := e.sizeHeaders(ok.Headers)
	for _, h := range ok.HeadersToRemove {
		n += e.strSize(h)
	}
	n += e.sizeHeaders(ok.ResponseHeadersToAdd)
	for _, q := range ok.QueryParametersToRemove {
		n += e.strSize(q)
	}
	return n
}

// sizeHeaders is the size of a repeated HeaderValueOption field.
func (e *CheckResponseEncoder) sizeHeaders(hs []*corev3.HeaderValueOption) int {
	n := 0
	for _, h := range hs {
		if h == nil {
			e.declined = true
			return 0
		}
		e.known(hasUnknown(h, unknownOption))
		o := 0
		if hv := h.Header; hv != nil {
			e.known(hasUnknown(hv, unknownHeader))
			v := 0
			if hv.Key != "" {
				v += e.strSize(hv.Key)
			}
			if hv.Value != "" {
				v += e.strSize(hv.Value)
			}
			if len(hv.RawValue) > 0 {
				v += lenSize(len(hv.RawValue))
			}
			o += lenSize(v)
		}
		//lint:ignore SA1019 the deprecated append is written as protobuf would
		if a := h.Append; a != nil {
			e.known(hasUnknown(a, unknownBool))
			if a.Value {
				o += lenSize(2)
			} else {
				o += lenSize(0)
			}
		}
		if h.AppendAction != 0 {
			o += int32Size(int32(h.AppendAction))
		}
		if h.KeepEmptyValue {
			o += 2
		}
		n += lenSize(o)
	}
	return n
}

// sizeMetadata sizes a Struct of scalar values, reading its entries in
// key order for Encode.
func (e *CheckResponseEncoder) sizeMetadata(st *structpb.Struct) int {
	e.known(hasUnknown(st, unknownStruct))
	e.sortFields(st.Fields)
	n := 0
	for _, en := range e.entries() {
		n += lenSize(e.strSize(en.key) + lenSize(e.sizeValue(en.val)))
	}
	return n
}

// sortFields reads the map's entries in key order, as deterministic
// marshaling writes them.
func (e *CheckResponseEncoder) sortFields(fields map[string]*structpb.Value) {
	if len(fields) > len(e.small) {
		e.big = make([]metaEntry, 0, len(fields))
		for k, v := range fields {
			e.big = append(e.big, metaEntry{k, v})
		}
		slices.SortFunc(e.big, func(a, b metaEntry) int { return strings.Compare(a.key, b.key) })
		return
	}
	n := 0
	for k, v := range fields {
		j := n
		for ; j > 0 && e.small[j-1].key > k; j-- {
			e.small[j] = e.small[j-1]
		}
		e.small[j] = metaEntry{k, v}
		n++
	}
	e.n = n
}

// sizeValue sizes a Value's contents; a oneof member is written even when
// it holds its zero value.
func (e *CheckResponseEncoder) sizeValue(v *structpb.Value) int {
	if v == nil {
		e.declined = true
		return 0
	}
	e.known(hasUnknown(v, unknownValue))
	switch k := v.Kind.(type) {
	case *structpb.Value_StringValue:
		if k != nil {
			return e.strSize(k.StringValue)
		}
	case *structpb.Value_BoolValue:
		if k != nil {
			return 2
		}
	case *structpb.Value_NumberValue:
		if k != nil {
			return 9
		}
	case *structpb.Value_NullValue:
		if k != nil {
			return int32Size(int32(k.NullValue))
		}
	}
	// No kind, a nil one, a struct or a list.
	e.declined = true
	return 0
}

// known declines a message holding unknown fields (hasUnknown).
func (e *CheckResponseEncoder) known(unknown bool) {
	if unknown {
		e.declined = true
	}
}

// strSize is the size of a string field; protobuf refuses invalid UTF-8
// in them.
func (e *CheckResponseEncoder) strSize(s string) int {
	if !validUTF8(s) {
		e.declined = true
	}
	return lenSize(len(s))
}

// validUTF8 is utf8.ValidString, quicker on the short ASCII strings of an
// answer (header names and values, metadata), which it reads a word at a
// time, the last word overlapping the one before, where ValidString reads
// the bytes after the last whole word one rune at a time.
func validUTF8(s string) bool {
	if len(s) < 8 {
		for i := 0; i < len(s); i++ {
			if s[i] >= utf8.RuneSelf {
				return utf8.ValidString(s)
			}
		}
		return true
	}
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	var or uint64
	for i := 0; i+8 <= len(b); i += 8 {
		or |= binary.LittleEndian.Uint64(b[i:])
	}
	or |= binary.LittleEndian.Uint64(b[len(b)-8:])
	if or&0x8080808080808080 == 0 {
		return true
	}
	return utf8.ValidString(s)
}

// lenSize is the size of a length-delimited field of n bytes.
func lenSize(n int) int {
	if n < 0x80 {
		return 2 + n
	}
	return 1 + protowire.SizeVarint(uint64(n)) + n
}

// int32Size is the size of an int32 or enum field, a negative one
// sign-extended to ten bytes.
func int32Size(v int32) int { return 1 + protowire.SizeVarint(uint64(int64(v))) }
