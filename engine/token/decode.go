package token

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
	"unsafe"
)

// maxDepth is encoding/json's nesting limit, kept so that both decoders
// accept the same documents.
const maxDepth = 10000

var (
	errSyntax   = errors.New("invalid json")
	errDepth    = errors.New("json nested too deeply")
	errNoObject = errors.New("json value is not an object")
	// errDuplicate: an object of a unique decoding names a member twice.
	errDuplicate = errors.New("json object names a member twice")
)

// decodeObject decodes a JSON object exactly as encoding/json decodes it
// into a map[string]any with UseNumber: nested objects become
// map[string]any, arrays []any, numbers json.Number holding the literal,
// duplicate members keep the last value, and strings with escapes or
// invalid UTF-8 are unquoted by encoding/json itself. The request path
// decodes the header and claims of every uncached token with its strict
// form, decodeUniqueObject, because encoding/json's reflection costs
// several times the work; this form, which keeps the last duplicate as
// encoding/json does, is what FuzzDecodeObject holds to encoding/json's
// results on every input, duplicates included.
//
// decodeObject takes ownership of buf: plain strings and numbers in the
// result alias it (saving a copy and an allocation each), so buf must not
// be modified afterwards.
func decodeObject(buf []byte) (map[string]any, error) {
	return decode(decoder{buf: buf})
}

// decodeUniqueObject is decodeObject refusing (errDuplicate) any object,
// at any depth, that names a member twice. RFC 7519 lets a parser keep the
// last duplicate, but parsers that keep the first exist: a token whose
// payload names tenant_id twice would then mean one tenant to the sidecar
// and another to an upstream that reads the same bearer token.
func decodeUniqueObject(buf []byte) (map[string]any, error) {
	return decode(decoder{buf: buf, unique: true})
}

// decode reads the one object that is d's whole buffer.
func decode(d decoder) (map[string]any, error) {
	d.skipSpace()
	if d.pos >= len(d.buf) || d.buf[d.pos] != '{' {
		return nil, errNoObject
	}
	m, err := d.object()
	if err != nil {
		return nil, err
	}
	d.skipSpace()
	if d.pos != len(d.buf) {
		return nil, errSyntax
	}
	return m, nil
}

type decoder struct {
	buf    []byte
	pos    int
	depth  int
	unique bool
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.buf) {
		switch d.buf[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

// next skips white space and returns the next byte, 0 at the end.
func (d *decoder) next() byte {
	d.skipSpace()
	if d.pos >= len(d.buf) {
		return 0
	}
	return d.buf[d.pos]
}

func (d *decoder) value() (any, error) {
	switch c := d.next(); {
	case c == '{':
		return d.object()
	case c == '[':
		return d.array()
	case c == '"':
		return d.str()
	case c == '-' || c >= '0' && c <= '9':
		return d.number()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	}
	return nil, errSyntax
}

func (d *decoder) literal(word string) error {
	if len(d.buf)-d.pos < len(word) || string(d.buf[d.pos:d.pos+len(word)]) != word {
		return errSyntax
	}
	d.pos += len(word)
	return nil
}

func (d *decoder) object() (map[string]any, error) {
	if d.depth++; d.depth > maxDepth {
		return nil, errDepth
	}
	d.pos++ // '{'
	m := make(map[string]any)
	if d.next() == '}' {
		d.pos++
		d.depth--
		return m, nil
	}
	for {
		if d.next() != '"' {
			return nil, errSyntax
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if d.next() != ':' {
			return nil, errSyntax
		}
		d.pos++
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		if d.unique {
			if _, dup := m[k]; dup {
				return nil, errDuplicate
			}
		}
		m[k] = v
		switch d.next() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			d.depth--
			return m, nil
		default:
			return nil, errSyntax
		}
	}
}

func (d *decoder) array() ([]any, error) {
	if d.depth++; d.depth > maxDepth {
		return nil, errDepth
	}
	d.pos++ // '['
	a := []any{}
	if d.next() == ']' {
		d.pos++
		d.depth--
		return a, nil
	}
	for {
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		switch d.next() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			d.depth--
			return a, nil
		default:
			return nil, errSyntax
		}
	}
}

// str decodes the string at d.pos (an opening quote). Plain strings of
// valid UTF-8 are copied directly; the rest go to encoding/json.
func (d *decoder) str() (string, error) {
	start := d.pos
	i := start + 1
	for i < len(d.buf) {
		c := d.buf[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return d.alias(start+1, i), nil
		case c == '\\' || c < 0x20:
			return d.slowStr(start)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(d.buf[i:])
			if r == utf8.RuneError && size == 1 {
				return d.slowStr(start)
			}
			i += size
		}
	}
	return "", errSyntax
}

// slowStr finds the end of the string starting at start and lets
// encoding/json unquote it, so escapes, surrogates and invalid UTF-8 are
// handled exactly as it handles them.
func (d *decoder) slowStr(start int) (string, error) {
	i := start + 1
	for i < len(d.buf) {
		switch d.buf[i] {
		case '\\':
			i += 2
			continue
		case '"':
			var s string
			if err := json.Unmarshal(d.buf[start:i+1], &s); err != nil {
				return "", errSyntax
			}
			d.pos = i + 1
			return s, nil
		}
		i++
	}
	return "", errSyntax
}

// number scans a JSON number (RFC 8259 §6) and keeps its literal.
func (d *decoder) number() (json.Number, error) {
	start := d.pos
	i := d.pos
	if d.buf[i] == '-' {
		i++
	}
	switch {
	case i < len(d.buf) && d.buf[i] == '0':
		i++
	case i < len(d.buf) && d.buf[i] >= '1' && d.buf[i] <= '9':
		i = d.digits(i + 1)
	default:
		return "", errSyntax
	}
	if i < len(d.buf) && d.buf[i] == '.' {
		j := d.digits(i + 1)
		if j == i+1 {
			return "", errSyntax
		}
		i = j
	}
	if i < len(d.buf) && (d.buf[i] == 'e' || d.buf[i] == 'E') {
		i++
		if i < len(d.buf) && (d.buf[i] == '+' || d.buf[i] == '-') {
			i++
		}
		j := d.digits(i)
		if j == i {
			return "", errSyntax
		}
		i = j
	}
	d.pos = i
	return json.Number(d.alias(start, i)), nil
}

// alias returns buf[i:j] as a string sharing buf's memory.
func (d *decoder) alias(i, j int) string {
	if i == j {
		return ""
	}
	return unsafe.String(&d.buf[i], j-i)
}

func (d *decoder) digits(i int) int {
	for i < len(d.buf) && d.buf[i] >= '0' && d.buf[i] <= '9' {
		i++
	}
	return i
}
