// Package plan holds resource plans: the answer to "which resources of a
// type may this caller act on?". A plan's kind says whether every
// resource, none, or those meeting a condition are permitted; the
// condition is a small tree over the resource's id, tenant and
// attributes that an application turns into a query: SQL with bind
// parameters (Condition.SQL) or an ORM's filter.
//
// The tree, as JSON:
//
//	{"op":"and"|"or","args":[…]}
//	{"op":"not","arg":…}
//	{"op":"eq"|"ne"|"lt"|"le"|"gt"|"ge","field":"id"|"tenant"|"attributes.<name>","value":…}
//	{"op":"in","field":…,"values":[…]}
//	{"op":"starts_with"|"ends_with"|"contains","field":…,"value":"…"}
//
// Values are JSON scalars: strings, numbers, booleans, null. A field the
// resource lacks (a NULL column) makes every comparison false, as an
// undefined reference makes a Rego expression false; "not" holds when
// its argument does not, so a missing field makes "not" true; eq and ne
// with null test for a missing field. starts_with, ends_with and contains
// take a string and hold for a string field that starts with, ends with
// or contains it, byte for byte (case-sensitive); a field that is not a
// string never meets them.
//
// The package is a leaf: the engine builds plans with it, clients parse
// and render them with it.
package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Kind says which resources a plan permits.
type Kind string

const (
	// AlwaysAllowed permits every resource of the type.
	AlwaysAllowed Kind = "always_allowed"
	// AlwaysDenied permits none.
	AlwaysDenied Kind = "always_denied"
	// Conditional permits the resources that meet the plan's condition.
	Conditional Kind = "conditional"
)

// Valid reports whether k is one of the three kinds.
func (k Kind) Valid() bool {
	return k == AlwaysAllowed || k == AlwaysDenied || k == Conditional
}

// Op is a condition's operator.
type Op string

const (
	And Op = "and"
	Or  Op = "or"
	Not Op = "not"
	Eq  Op = "eq"
	Ne  Op = "ne"
	Lt  Op = "lt"
	Le  Op = "le"
	Gt  Op = "gt"
	Ge  Op = "ge"
	In  Op = "in"
	// StartsWith, EndsWith and Contains test a string field for a
	// prefix, a suffix or a substring: case-sensitive, as Rego's
	// startswith, endswith and contains.
	StartsWith Op = "starts_with"
	EndsWith   Op = "ends_with"
	Contains   Op = "contains"
)

// comparison reports whether op compares a field with one value.
func (op Op) comparison() bool {
	switch op {
	case Eq, Ne, Lt, Le, Gt, Ge, StartsWith, EndsWith, Contains:
		return true
	}
	return false
}

// stringTest reports whether op tests a string field for a substring.
func (op Op) stringTest() bool {
	return op == StartsWith || op == EndsWith || op == Contains
}

// Condition is a node of a plan's condition tree. Which fields are set
// depends on Op: Args for and/or, Arg for not, Field and Value for the
// comparisons, Field and Values for in.
type Condition struct {
	Op     Op
	Args   []*Condition
	Arg    *Condition
	Field  string
	Value  any
	Values []any
}

// Field names.
const (
	FieldID     = "id"
	FieldTenant = "tenant"
	// AttributePrefix starts the field of an attribute:
	// "attributes.owner" is input.resource.attributes.owner.
	AttributePrefix = "attributes."
)

// MaxDepth bounds how deeply conditions nest; MaxNodes how many a tree
// holds. A parsed tree over either bound is refused.
const (
	MaxDepth = 64
	MaxNodes = 10000
)

// Error is a condition that is not well formed.
type Error struct{ Msg string }

func (e *Error) Error() string { return "plan: " + e.Msg }

func errorf(format string, args ...any) error { return &Error{Msg: fmt.Sprintf(format, args...)} }

// ValidField reports whether f names a field of a resource: "id",
// "tenant" or "attributes.<name>" with a non-empty name.
func ValidField(f string) bool {
	return f == FieldID || f == FieldTenant || (strings.HasPrefix(f, AttributePrefix) && len(f) > len(AttributePrefix))
}

// Validate checks that c is a well-formed tree within the bounds.
func (c *Condition) Validate() error {
	n := 0
	return c.validate(1, &n)
}

func (c *Condition) validate(depth int, nodes *int) error {
	if c == nil {
		return errorf("missing condition")
	}
	*nodes++
	if depth > MaxDepth {
		return errorf("conditions nested deeper than %d", MaxDepth)
	}
	if *nodes > MaxNodes {
		return errorf("more than %d conditions", MaxNodes)
	}
	switch {
	case c.Op == And || c.Op == Or:
		for _, a := range c.Args {
			if err := a.validate(depth+1, nodes); err != nil {
				return err
			}
		}
		return nil
	case c.Op == Not:
		return c.Arg.validate(depth+1, nodes)
	case c.Op.comparison() || c.Op == In:
		if !ValidField(c.Field) {
			return errorf("%s: field %q is not id, tenant or attributes.<name>", c.Op, c.Field)
		}
		vals := c.Values
		if c.Op != In {
			vals = []any{c.Value}
		}
		for _, v := range vals {
			if !scalar(v) {
				return errorf("%s %s: value %T is not a string, number, boolean or null", c.Field, c.Op, v)
			}
		}
		if c.Value != nil && c.Op == In {
			return errorf("in: takes values, not value")
		}
		if c.Value == nil && (c.Op == Lt || c.Op == Le || c.Op == Gt || c.Op == Ge) {
			return errorf("%s %s: null cannot be ordered", c.Field, c.Op)
		}
		if _, ok := c.Value.(string); c.Op.stringTest() && !ok {
			return errorf("%s %s: value %s is not a string", c.Field, c.Op, describeValue(c.Value))
		}
		return nil
	}
	return errorf("unknown op %q", c.Op)
}

// describeValue names v for an error: JSON when it has a JSON form, else
// its type.
func describeValue(v any) string {
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprintf("%T", v)
}

// scalar reports whether v is a value a condition may compare with.
func scalar(v any) bool {
	switch x := v.(type) {
	case nil, string, bool, int, int64, json.Number:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	}
	return false
}

// MarshalJSON writes c in the tree's JSON shape; a comparison always
// has its value (null included), in always its values.
func (c *Condition) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := c.appendJSON(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func (c *Condition) appendJSON(b *bytes.Buffer) error {
	if c == nil {
		b.WriteString("null")
		return nil
	}
	op, _ := json.Marshal(string(c.Op))
	b.WriteString(`{"op":`)
	b.Write(op)
	switch {
	case c.Op == And || c.Op == Or:
		b.WriteString(`,"args":[`)
		for i, a := range c.Args {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := a.appendJSON(b); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case c.Op == Not:
		b.WriteString(`,"arg":`)
		if err := c.Arg.appendJSON(b); err != nil {
			return err
		}
	default:
		f, _ := json.Marshal(c.Field)
		b.WriteString(`,"field":`)
		b.Write(f)
		if c.Op == In {
			vals := c.Values
			if vals == nil {
				vals = []any{}
			}
			v, err := json.Marshal(vals)
			if err != nil {
				return err
			}
			b.WriteString(`,"values":`)
			b.Write(v)
		} else {
			v, err := json.Marshal(c.Value)
			if err != nil {
				return err
			}
			b.WriteString(`,"value":`)
			b.Write(v)
		}
	}
	b.WriteByte('}')
	return nil
}

// UnmarshalJSON reads the tree's JSON shape. Numbers are read as
// json.Number, so that none loses precision; the tree is validated.
func (c *Condition) UnmarshalJSON(data []byte) error {
	n := 0
	if err := c.decode(data, 1, &n); err != nil {
		return err
	}
	return c.Validate()
}

func (c *Condition) decode(data []byte, depth int, nodes *int) error {
	*nodes++
	if depth > MaxDepth {
		return errorf("conditions nested deeper than %d", MaxDepth)
	}
	if *nodes > MaxNodes {
		return errorf("more than %d conditions", MaxNodes)
	}
	var w struct {
		Op     Op                `json:"op"`
		Args   []json.RawMessage `json:"args"`
		Arg    json.RawMessage   `json:"arg"`
		Field  string            `json:"field"`
		Value  json.RawMessage   `json:"value"`
		Values json.RawMessage   `json:"values"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return errorf("condition: %v", err)
	}
	*c = Condition{Op: w.Op, Field: w.Field}
	for _, a := range w.Args {
		sub := &Condition{}
		if err := sub.decode(a, depth+1, nodes); err != nil {
			return err
		}
		c.Args = append(c.Args, sub)
	}
	if len(w.Arg) > 0 && string(w.Arg) != "null" {
		c.Arg = &Condition{}
		if err := c.Arg.decode(w.Arg, depth+1, nodes); err != nil {
			return err
		}
	}
	if len(w.Value) > 0 {
		v, err := decodeValue(w.Value)
		if err != nil {
			return err
		}
		c.Value = v
	}
	if len(w.Values) > 0 && string(w.Values) != "null" {
		var raw []json.RawMessage
		if err := json.Unmarshal(w.Values, &raw); err != nil {
			return errorf("values: %v", err)
		}
		c.Values = make([]any, 0, len(raw))
		for _, r := range raw {
			v, err := decodeValue(r)
			if err != nil {
				return err
			}
			c.Values = append(c.Values, v)
		}
	} else if c.Op == In {
		c.Values = []any{}
	}
	return nil
}

func decodeValue(raw json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, errorf("value: %v", err)
	}
	if !scalar(v) {
		return nil, errorf("value %s is not a string, number, boolean or null", raw)
	}
	return v, nil
}

// ErrNoCondition is Plan.SQL's error for a conditional plan without a
// condition.
var ErrNoCondition = errors.New("plan: a conditional plan without a condition")
