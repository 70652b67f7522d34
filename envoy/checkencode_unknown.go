package envoy

import (
	"reflect"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The encoder declines a message holding unknown fields. Asking through
// ProtoReflect().GetUnknown() costs a fifth of an allowed answer's
// encoding (a dozen messages); the unknown fields are read instead where
// protoc-gen-go keeps them, the unknownFields []byte field of the
// message's struct, found once per type by reflection. A type without
// that field is asked through ProtoReflect.
type unknownAt struct {
	off uintptr
	ok  bool
}

func unknownOffset[T any]() unknownAt {
	f, ok := reflect.TypeFor[T]().FieldByName("unknownFields")
	if !ok || f.Type != reflect.TypeFor[[]byte]() {
		return unknownAt{}
	}
	return unknownAt{off: f.Offset, ok: true}
}

var (
	unknownCheckResponse = unknownOffset[authv3.CheckResponse]()
	unknownStatus        = unknownOffset[rpcstatus.Status]()
	unknownDenied        = unknownOffset[authv3.DeniedHttpResponse]()
	unknownHTTPStatus    = unknownOffset[typev3.HttpStatus]()
	unknownOK            = unknownOffset[authv3.OkHttpResponse]()
	unknownOption        = unknownOffset[corev3.HeaderValueOption]()
	unknownHeader        = unknownOffset[corev3.HeaderValue]()
	unknownBool          = unknownOffset[wrapperspb.BoolValue]()
	unknownStruct        = unknownOffset[structpb.Struct]()
	unknownValue         = unknownOffset[structpb.Value]()
)

// hasUnknown reports whether m (not nil) holds unknown fields; at is its
// type's unknownOffset.
func hasUnknown[T any, P interface {
	*T
	proto.Message
}](m P, at unknownAt) bool {
	if at.ok {
		return len(*(*[]byte)(unsafe.Add(unsafe.Pointer(m), at.off))) > 0
	}
	return len(m.ProtoReflect().GetUnknown()) > 0
}
