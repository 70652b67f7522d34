package plan

import (
	"encoding/json"
	"math/big"
	"strings"
)

// Row is a resource as a plan's condition sees it: what a table row
// holds. A field the row lacks is NULL.
type Row struct {
	ID         string         `json:"id"`
	Tenant     string         `json:"tenant"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// Match reports whether the condition holds for r as a database would
// find it with the condition's SQL: with SQL's three-valued logic, a
// missing field making a comparison unknown, an unknown WHERE excluding
// the row, and "not" holding when its argument does not hold.
// Comparisons of values of different types (a string with a number) are
// unknown, as a typed column cannot hold both; starts_with, ends_with and
// contains hold only for a string field.
func (c *Condition) Match(r Row) bool {
	return c.eval(r) == yes
}

type truth uint8

const (
	no truth = iota
	yes
	unknown
)

func (c *Condition) eval(r Row) truth {
	switch c.Op {
	case And, Or:
		// and stops at the first false, or at the first true; an
		// unknown argument makes the rest unknown.
		stop, out := no, yes
		if c.Op == Or {
			stop, out = yes, no
		}
		for _, a := range c.Args {
			switch v := a.eval(r); v {
			case stop:
				return stop
			case unknown:
				out = unknown
			}
		}
		return out
	case Not:
		if c.Arg.eval(r) == yes {
			return no
		}
		return yes
	}
	v, present := r.field(c.Field)
	if !present {
		v = nil
	}
	if c.Op == In {
		if v == nil {
			for _, x := range c.Values {
				if x == nil {
					return yes
				}
			}
			return unknown
		}
		out := no
		for _, x := range c.Values {
			if x == nil {
				continue
			}
			switch cmp, ok := compare(v, x); {
			case !ok:
				out = unknown
			case cmp == 0:
				return yes
			}
		}
		return out
	}
	if c.Op.stringTest() {
		return stringTest(c.Op, v, c.Value)
	}
	if c.Value == nil {
		if (v == nil) == (c.Op == Eq) {
			return yes
		}
		return no
	}
	if v == nil {
		return unknown
	}
	cmp, ok := compare(v, c.Value)
	if !ok {
		return unknown
	}
	var hold bool
	switch c.Op {
	case Eq:
		hold = cmp == 0
	case Ne:
		hold = cmp != 0
	case Lt:
		hold = cmp < 0
	case Le:
		hold = cmp <= 0
	case Gt:
		hold = cmp > 0
	case Ge:
		hold = cmp >= 0
	}
	if hold {
		return yes
	}
	return no
}

// stringTest is starts_with, ends_with or contains of v and w: unknown
// unless both are strings (a NULL, or a column of another type), else
// whether w is a prefix, suffix or substring of v, byte for byte.
func stringTest(op Op, v, w any) truth {
	s, ok := v.(string)
	sub, ok2 := w.(string)
	if !ok || !ok2 {
		return unknown
	}
	var hold bool
	switch op {
	case StartsWith:
		hold = strings.HasPrefix(s, sub)
	case EndsWith:
		hold = strings.HasSuffix(s, sub)
	case Contains:
		hold = strings.Contains(s, sub)
	}
	if hold {
		return yes
	}
	return no
}

// field is the row's value of a condition field; JSON null counts as
// missing.
func (r Row) field(f string) (any, bool) {
	switch f {
	case FieldID:
		return r.ID, true
	case FieldTenant:
		return r.Tenant, true
	}
	v, ok := r.Attributes[strings.TrimPrefix(f, AttributePrefix)]
	return v, ok && v != nil
}

// compare orders two scalars of one type; ok is false for values of
// different types or that are not scalars.
func compare(a, b any) (int, bool) {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(x, y), true
	case bool:
		y, ok := b.(bool)
		if !ok {
			return 0, false
		}
		switch {
		case x == y:
			return 0, true
		case !x:
			return -1, true
		}
		return 1, true
	}
	x, ok := number(a)
	if !ok {
		return 0, false
	}
	y, ok := number(b)
	if !ok {
		return 0, false
	}
	return x.Cmp(y), true
}

func number(v any) (*big.Float, bool) {
	switch x := v.(type) {
	case json.Number:
		f, _, err := big.ParseFloat(string(x), 10, 256, big.ToNearestEven)
		return f, err == nil
	case float64:
		return big.NewFloat(x), true
	case int:
		return new(big.Float).SetInt64(int64(x)), true
	case int64:
		return new(big.Float).SetInt64(x), true
	}
	return nil, false
}
