// Package filter parses and evaluates the field filters of the live log
// and decision streams, such as
//
//	policy.result=denied AND (tenant=acme OR tenant=globex) AND user_id!=probe
//
// A comparison is field=value or field!=value; AND binds tighter than OR
// and parentheses group. Keywords are case-insensitive. A value is a bare
// word (no space, no parenthesis, no quote) or a double-quoted string with
// \" and \\ escapes. Values compare exactly, except those of the field
// level, which compare case-insensitively. field!=value also holds for a
// record without the field.
//
// Parse errors are *SyntaxError, which names the 1-based position of the
// problem in the expression.
package filter

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen bounds an expression, which comes from a URL query.
const MaxLen = 4096

// maxDepth bounds nesting, so that a hostile expression cannot exhaust
// the stack.
const maxDepth = 64

// SyntaxError is a malformed expression.
type SyntaxError struct {
	// Pos is the 1-based position (in characters) of the problem.
	Pos int
	// Msg says what was expected.
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("malformed filter at position %d: %s", e.Pos, e.Msg)
}

// Expr is a parsed filter. The zero of *Expr (nil) matches everything.
type Expr struct {
	op       byte // '&', '|', '=' or '!'
	children []*Expr
	field    string
	value    string
}

// Getter returns a record's value for a field, and whether it has one.
type Getter func(field string) (string, bool)

// Match reports whether the record behind get satisfies e.
func (e *Expr) Match(get Getter) bool {
	if e == nil {
		return true
	}
	switch e.op {
	case '&':
		for _, c := range e.children {
			if !c.Match(get) {
				return false
			}
		}
		return true
	case '|':
		for _, c := range e.children {
			if c.Match(get) {
				return true
			}
		}
		return false
	}
	v, ok := get(e.field)
	eq := ok && (v == e.value || (e.field == "level" && strings.EqualFold(v, e.value)))
	if e.op == '=' {
		return eq
	}
	return !eq
}

// String renders e in canonical form: keywords in capitals, every group
// parenthesized, values quoted when needed.
func (e *Expr) String() string {
	if e == nil {
		return ""
	}
	switch e.op {
	case '&', '|':
		kw := " AND "
		if e.op == '|' {
			kw = " OR "
		}
		parts := make([]string, len(e.children))
		for i, c := range e.children {
			parts[i] = c.String()
			if len(c.children) > 0 {
				parts[i] = "(" + parts[i] + ")"
			}
		}
		return strings.Join(parts, kw)
	}
	op := "="
	if e.op == '!' {
		op = "!="
	}
	return e.field + op + quote(e.value)
}

func quote(v string) string {
	if v != "" && !strings.ContainsFunc(v, func(r rune) bool {
		return unicode.IsSpace(r) || r == '(' || r == ')' || r == '"' || r == '\\' || r == '=' || r == '!'
	}) {
		return v
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
}

// Fields returns the fields e compares, in order of appearance.
func (e *Expr) Fields() []string {
	if e == nil {
		return nil
	}
	if len(e.children) == 0 {
		return []string{e.field}
	}
	var out []string
	for _, c := range e.children {
		out = append(out, c.Fields()...)
	}
	return out
}

// Parse parses s. An empty (or all-space) s is a nil *Expr, which matches
// everything.
func Parse(s string) (*Expr, error) {
	if len(s) > MaxLen {
		return nil, &SyntaxError{Pos: MaxLen + 1, Msg: fmt.Sprintf("expression longer than %d bytes", MaxLen)}
	}
	if !utf8.ValidString(s) {
		return nil, &SyntaxError{Pos: 1, Msg: "expression is not valid UTF-8"}
	}
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	if len(toks) == 1 { // only the end
		return nil, nil
	}
	p := &parser{toks: toks}
	e, err := p.or(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEnd {
		return nil, &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("expected AND, OR or the end, got %s", t)}
	}
	return e, nil
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEnd {
		p.i++
	}
	return t
}

func (p *parser) or(depth int) (*Expr, error) {
	return p.list(depth, tOr, '|', p.and)
}

func (p *parser) and(depth int) (*Expr, error) {
	return p.list(depth, tAnd, '&', p.term)
}

func (p *parser) list(depth int, sep kind, op byte, sub func(int) (*Expr, error)) (*Expr, error) {
	first, err := sub(depth)
	if err != nil {
		return nil, err
	}
	if p.peek().kind != sep {
		return first, nil
	}
	e := &Expr{op: op, children: []*Expr{first}}
	for p.peek().kind == sep {
		p.next()
		c, err := sub(depth)
		if err != nil {
			return nil, err
		}
		e.children = append(e.children, c)
	}
	return e, nil
}

func (p *parser) term(depth int) (*Expr, error) {
	t := p.next()
	switch t.kind {
	case tOpen:
		if depth >= maxDepth {
			return nil, &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("parentheses nested deeper than %d", maxDepth)}
		}
		e, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tClose {
			return nil, &SyntaxError{Pos: c.pos, Msg: fmt.Sprintf("expected ) to close the ( at position %d, got %s", t.pos, c)}
		}
		return e, nil
	case tWord:
		if !validField(t.text) {
			return nil, &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("%q is not a field name (letters, digits, _ . -)", t.text)}
		}
		op := p.next()
		if op.kind != tEq && op.kind != tNe {
			return nil, &SyntaxError{Pos: op.pos, Msg: fmt.Sprintf("expected = or != after field %q, got %s", t.text, op)}
		}
		v := p.next()
		if v.kind != tWord && v.kind != tString {
			return nil, &SyntaxError{Pos: v.pos, Msg: fmt.Sprintf("expected a value after %s, got %s", op, v)}
		}
		e := &Expr{op: '=', field: t.text, value: v.text}
		if op.kind == tNe {
			e.op = '!'
		}
		if e.field == "level" {
			e.value = strings.ToLower(e.value)
		}
		return e, nil
	}
	return nil, &SyntaxError{Pos: t.pos, Msg: fmt.Sprintf("expected a comparison such as field=value or (, got %s", t)}
}

func validField(s string) bool {
	for i, r := range s {
		ok := r == '_' || unicode.IsLetter(r) || (i > 0 && (unicode.IsDigit(r) || r == '.' || r == '-'))
		if !ok {
			return false
		}
	}
	return s != ""
}
