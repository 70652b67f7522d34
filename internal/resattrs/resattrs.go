// Package resattrs checks and normalizes a resource's attributes
// (input.resource.attributes) against the bounds every API applies: the
// decision API, the Go SDK and the C interface of the Rust SDK.
package resattrs

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf8"

	"github.com/svc-dev/svc/reason"
)

// Bounds of a resource's attributes. They leave room for what
// applications tell about a resource (owner, status, department, a few
// tags) and keep the policy input, the audit record and the decision
// cache key small.
const (
	// MaxCount is the most attributes a resource may carry.
	MaxCount = 64
	// MaxKeyLen is the longest key, in bytes, at any depth.
	MaxKeyLen = 128
	// MaxDepth is the deepest nesting of objects and arrays, the
	// attributes object itself counting as 1: {"a":{"b":[1]}} is 3 deep.
	MaxDepth = 4
	// MaxSize is the most bytes the attributes take as JSON.
	MaxSize = 16 << 10
)

// Normalize returns a as the JSON values a policy sees (what
// encoding/json makes of a, decoded again with numbers as json.Number),
// checked against the bounds; nil when a is empty. An error is a
// *reason.Error with code reason.InputInvalid whose message names the
// bound, never a value.
func Normalize(a map[string]any) (map[string]any, error) {
	if len(a) == 0 {
		return nil, nil
	}
	if len(a) > MaxCount {
		return nil, reason.New(reason.InputInvalid, "resource.attributes has more than %d attributes", MaxCount)
	}
	// Keys are checked before encoding: encoding/json would replace
	// invalid UTF-8, and two keys could become one.
	for k := range a {
		if err := checkKey(k); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, notJSON()
	}
	if len(raw) > MaxSize {
		return nil, reason.New(reason.InputInvalid, "resource.attributes is larger than %d bytes as JSON", MaxSize)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		return nil, notJSON()
	}
	if err := checkValue(out, 1); err != nil {
		return nil, err
	}
	return out, nil
}

func notJSON() error {
	return reason.New(reason.InputInvalid, "resource.attributes holds a value that is not JSON")
}

// checkKey checks one key of the attributes or of an object in them.
func checkKey(k string) error { return CheckText("a key of resource.attributes", k, MaxKeyLen) }

// CheckText rejects a text field of a decision request that is longer
// than max bytes, not UTF-8 or that holds control characters (which
// would corrupt log and audit lines): reason.InputInvalid, the message
// naming the field, never its value.
func CheckText(field, v string, max int) error {
	if len(v) > max {
		return reason.New(reason.InputInvalid, "%s is longer than %d bytes", field, max)
	}
	if !utf8.ValidString(v) {
		return reason.New(reason.InputInvalid, "%s is not valid UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return reason.New(reason.InputInvalid, "%s holds a control character", field)
		}
	}
	return nil
}

// checkValue checks the keys and the depth of v, a decoded JSON value at
// depth (the attributes object being at 1).
func checkValue(v any, depth int) error {
	switch x := v.(type) {
	case map[string]any:
		if depth > MaxDepth {
			return tooDeep()
		}
		for k, e := range x {
			if err := checkKey(k); err != nil {
				return err
			}
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	case []any:
		if depth > MaxDepth {
			return tooDeep()
		}
		for _, e := range x {
			if err := checkValue(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func tooDeep() error {
	return reason.New(reason.InputInvalid, "resource.attributes is nested deeper than %d levels", MaxDepth)
}
