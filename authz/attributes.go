package authz

import (
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svc-dev/svc/internal/resattrs"
	"github.com/svc-dev/svc/reason"
)

// Bounds of Resource.Attributes. They leave room for what applications
// tell about a resource (owner, status, department, a few tags) and keep
// the policy input, the audit record and the decision cache key small.
const (
	// MaxAttributes is the most attributes a resource may carry.
	MaxAttributes = resattrs.MaxCount
	// MaxAttributeKeyLen is the longest key, in bytes, at any depth.
	MaxAttributeKeyLen = resattrs.MaxKeyLen
	// MaxAttributesDepth is the deepest nesting of objects and arrays,
	// the attributes object itself counting as 1: {"a":{"b":[1]}} is 3
	// deep.
	MaxAttributesDepth = resattrs.MaxDepth
	// MaxAttributesSize is the most bytes the attributes take as JSON.
	MaxAttributesSize = resattrs.MaxSize
)

// attributesProto converts attributes to a Struct. It fails with
// reason.InputInvalid for values that are not JSON or out of bounds.
func attributesProto(a map[string]any) (*structpb.Struct, error) {
	n, err := resattrs.Normalize(a)
	if err != nil || n == nil {
		return nil, err
	}
	s, err := structpb.NewStruct(n)
	if err != nil {
		return nil, reason.New(reason.InputInvalid, "resource.attributes holds a value that is not JSON")
	}
	return s, nil
}
