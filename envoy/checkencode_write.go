package envoy

import (
	"math"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"
)

// checkWriter writes a CheckResponse the encoder has sized into b, from
// its end: every message from its last field to its first, and its
// length and tag after (that is, before) its contents, so that nothing
// needs a size ahead of its bytes. It writes exactly what the sizing
// (checkencode.go) counts.
type checkWriter struct {
	b       []byte
	i       int         // b[i:] is written
	entries []metaEntry // the dynamic metadata's, sorted
}

// tag is the one-byte tag of field num (< 16) of type typ.
func tag(num protowire.Number, typ protowire.Type) byte { return byte(num)<<3 | byte(typ) }

const (
	lenType    = protowire.BytesType
	varintType = protowire.VarintType
)

func (w *checkWriter) checkResponse(m *authv3.CheckResponse) {
	if m == nil {
		return
	}
	// protobuf writes the fields outside the oneof first, in number
	// order, then the oneof's.
	switch r := m.HttpResponse.(type) {
	case *authv3.CheckResponse_OkResponse:
		end := w.i
		w.okResponse(r.OkResponse)
		w.lenTag(tag(fOK, lenType), end)
	case *authv3.CheckResponse_DeniedResponse:
		end := w.i
		w.deniedResponse(r.DeniedResponse)
		w.lenTag(tag(fDenied, lenType), end)
	case *authv3.CheckResponse_ErrorResponse:
		end := w.i
		w.deniedResponse(r.ErrorResponse)
		w.lenTag(tag(fError, lenType), end)
	}
	if m.DynamicMetadata != nil {
		end := w.i
		w.metadata()
		w.lenTag(tag(fMetadata, lenType), end)
	}
	if s := m.Status; s != nil {
		end := w.i
		w.status(s)
		w.lenTag(tag(fStatus, lenType), end)
	}
}

func (w *checkWriter) status(s *rpcstatus.Status) {
	if s.Message != "" {
		w.str(tag(fStatusMessage, lenType), s.Message)
	}
	if s.Code != 0 {
		w.int32Field(tag(fStatusCode, varintType), s.Code)
	}
}

func (w *checkWriter) deniedResponse(d *authv3.DeniedHttpResponse) {
	if d.Body != "" {
		w.str(tag(fDeniedBody, lenType), d.Body)
	}
	w.headers(tag(fDeniedHeaders, lenType), d.Headers)
	if s := d.Status; s != nil {
		end := w.i
		if s.Code != 0 {
			w.int32Field(tag(fHTTPStatusCode, varintType), int32(s.Code))
		}
		w.lenTag(tag(fDeniedStatus, lenType), end)
	}
}

func (w *checkWriter) okResponse(ok *authv3.OkHttpResponse) {
	w.strs(tag(fOKQueryRemove, lenType), ok.QueryParametersToRemove)
	w.headers(tag(fOKResponseHeaders, lenType), ok.ResponseHeadersToAdd)
	w.strs(tag(fOKRemove, lenType), ok.HeadersToRemove)
	w.headers(tag(fOKHeaders, lenType), ok.Headers)
}

// headers writes a repeated HeaderValueOption field.
func (w *checkWriter) headers(t byte, hs []*corev3.HeaderValueOption) {
	for j := len(hs) - 1; j >= 0; j-- {
		h := hs[j]
		end := w.i
		if h.KeepEmptyValue {
			w.byte1(1)
			w.byte1(tag(fOptionKeepEmpty, varintType))
		}
		if h.AppendAction != 0 {
			w.int32Field(tag(fOptionAction, varintType), int32(h.AppendAction))
		}
		//lint:ignore SA1019 the deprecated append is written as protobuf would
		if a := h.Append; a != nil {
			if a.Value {
				w.byte1(1)
				w.byte1(tag(fBoolValue, varintType))
				w.byte1(2)
			} else {
				w.byte1(0)
			}
			w.byte1(tag(fOptionAppend, lenType))
		}
		if hv := h.Header; hv != nil {
			end := w.i
			if len(hv.RawValue) > 0 {
				w.i -= len(hv.RawValue)
				copy(w.b[w.i:], hv.RawValue)
				w.uvarint(uint64(len(hv.RawValue)))
				w.byte1(tag(fHeaderRaw, lenType))
			}
			if hv.Value != "" {
				w.str(tag(fHeaderValue, lenType), hv.Value)
			}
			if hv.Key != "" {
				w.str(tag(fHeaderKey, lenType), hv.Key)
			}
			w.lenTag(tag(fOptionHeader, lenType), end)
		}
		w.lenTag(t, end)
	}
}

// metadata writes the sorted entries of the dynamic metadata's Struct.
func (w *checkWriter) metadata() {
	for j := len(w.entries) - 1; j >= 0; j-- {
		en := &w.entries[j]
		end := w.i
		w.value(en.val)
		w.lenTag(tag(fEntryValue, lenType), end)
		w.str(tag(fEntryKey, lenType), en.key)
		w.lenTag(tag(fStructFields, lenType), end)
	}
}

func (w *checkWriter) value(v *structpb.Value) {
	switch k := v.Kind.(type) {
	case *structpb.Value_StringValue:
		w.str(tag(fString, lenType), k.StringValue)
	case *structpb.Value_BoolValue:
		if k.BoolValue {
			w.byte1(1)
		} else {
			w.byte1(0)
		}
		w.byte1(tag(fBool, varintType))
	case *structpb.Value_NumberValue:
		w.i -= 8
		protowire.AppendFixed64(w.b[w.i:w.i], math.Float64bits(k.NumberValue))
		w.byte1(tag(fNumber, protowire.Fixed64Type))
	case *structpb.Value_NullValue:
		w.int32Field(tag(fNull, varintType), int32(k.NullValue))
	default: // changed since Prepare
		w.i = -1
	}
}

func (w *checkWriter) byte1(c byte) {
	w.i--
	w.b[w.i] = c
}

func (w *checkWriter) uvarint(v uint64) {
	if v < 0x80 {
		w.i--
		w.b[w.i] = byte(v)
		return
	}
	w.uvarintLong(v)
}

func (w *checkWriter) uvarintLong(v uint64) {
	w.i -= protowire.SizeVarint(v)
	protowire.AppendVarint(w.b[w.i:w.i], v)
}

// lenTag prefixes what was written since end with its length and tag t.
func (w *checkWriter) lenTag(t byte, end int) {
	w.uvarint(uint64(end - w.i))
	w.byte1(t)
}

func (w *checkWriter) str(t byte, s string) {
	w.i -= len(s)
	copy(w.b[w.i:], s)
	w.uvarint(uint64(len(s)))
	w.byte1(t)
}

// strs writes a repeated string field, empty strings included.
func (w *checkWriter) strs(t byte, ss []string) {
	for j := len(ss) - 1; j >= 0; j-- {
		w.str(t, ss[j])
	}
}

// int32Field writes an int32 or an enum: a negative one sign-extended to
// ten bytes, as protobuf does.
func (w *checkWriter) int32Field(t byte, v int32) {
	w.uvarint(uint64(int64(v)))
	w.byte1(t)
}
