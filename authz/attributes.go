package authz

import (
	"bytes"
	"encoding/json"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svc-dev/svc/reason"
)

// Bounds of Resource.Attributes. They leave room for what applications
// tell about a resource (owner, status, department, a few tags) and keep
// the policy input, the audit record and the decision cache key small.
const (
	// MaxAttributes is the most attributes a resource may carry.
	MaxAttributes = 64
	// MaxAttributeKeyLen is the longest key, in bytes, at any depth.
	MaxAttributeKeyLen = 128
	// MaxAttributesDepth is the deepest nesting of objects and arrays,
	// the attributes object itself counting as 1: {"a":{"b":[1]}} is 3
	// deep.
	MaxAttributesDepth = 4
	// MaxAttributesSize is the most bytes the attributes take as JSON.
	MaxAttributesSize = 16 << 10
)

// normalizeAttributes returns a as the JSON values a policy sees (what
// encoding/json makes of a, decoded again with numbers as json.Number),
// checked against the bounds; nil when a is empty. An error is a
// *reason.Error with code reason.InputInvalid whose message names the
// bound, never a value.
func normalizeAttributes(a map[string]any) (map[string]any, error) {
	if len(a) == 0 {
		return nil, nil
	}
	if len(a) > MaxAttributes {
		return nil, reason.New(reason.InputInvalid, "resource.attributes has more than %d attributes", MaxAttributes)
	}
	// Keys are checked before encoding: encoding/json would replace
	// invalid UTF-8, and two keys could become one.
	for k := range a {
		if err := checkAttributeKey(k); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, reason.New(reason.InputInvalid, "resource.attributes holds a value that is not JSON")
	}
	if len(raw) > MaxAttributesSize {
		return nil, reason.New(reason.InputInvalid, "resource.attributes is larger than %d bytes as JSON", MaxAttributesSize)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, reason.New(reason.InputInvalid, "resource.attributes holds a value that is not JSON")
	}
	if err := checkAttributeValue(out, 1); err != nil {
		return nil, err
	}
	return out, nil
}

// checkAttributeKey checks one key of the attributes or of an object in
// them.
func checkAttributeKey(k string) error {
	return checkText("a key of resource.attributes", k, MaxAttributeKeyLen)
}

// checkAttributeValue checks the keys and the depth of v, a decoded JSON
// value at depth (the attributes object being at 1).
func checkAttributeValue(v any, depth int) error {
	switch x := v.(type) {
	case map[string]any:
		if depth > MaxAttributesDepth {
			return reason.New(reason.InputInvalid, "resource.attributes is nested deeper than %d levels", MaxAttributesDepth)
		}
		for k, e := range x {
			if err := checkAttributeKey(k); err != nil {
				return err
			}
			if err := checkAttributeValue(e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		if depth > MaxAttributesDepth {
			return reason.New(reason.InputInvalid, "resource.attributes is nested deeper than %d levels", MaxAttributesDepth)
		}
		for _, e := range x {
			if err := checkAttributeValue(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// attributesProto converts attributes to a Struct. It fails with
// reason.InputInvalid for values that are not JSON or out of bounds.
func attributesProto(a map[string]any) (*structpb.Struct, error) {
	n, err := normalizeAttributes(a)
	if err != nil || n == nil {
		return nil, err
	}
	s, err := structpb.NewStruct(n)
	if err != nil {
		return nil, reason.New(reason.InputInvalid, "resource.attributes holds a value that is not JSON")
	}
	return s, nil
}
