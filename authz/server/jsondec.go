package server

import (
	"unicode/utf8"

	authzv1 "github.com/svc-dev/svc/authz/v1"
)

// decodeAuthorizeRequest decodes body into req as protojson (jsonIn)
// would, for the bodies SDKs send: one object of the fields token, action
// and resource (an object of type, id and tenant), every value a string
// without escapes or control characters. protojson walks the message
// through protoreflect, allocating for every field it sets.
//
// It returns false, req then being in any state, for every other body:
// one with escapes, nulls, numbers, the request field, an unknown or
// repeated field, invalid UTF-8, a syntax error or trailing data. The
// caller then decodes it with protojson (which resets req first), so that
// what is accepted and the errors of what is not stay protojson's.
func decodeAuthorizeRequest(body []byte, req *authzv1.AuthorizeRequest) bool {
	d := fastDecoder{b: body}
	var seen [4]bool // token, action, resource, resource fields below
	ok := d.object(func(name []byte) bool {
		switch string(name) {
		case "token":
			return !seen[0] && d.setString(&req.Token, &seen[0])
		case "action":
			return !seen[1] && d.setString(&req.Action, &seen[1])
		case "resource":
			if seen[2] {
				return false
			}
			seen[2] = true
			res := &authzv1.Resource{}
			req.Resource = res
			var rseen [3]bool
			return d.object(func(name []byte) bool {
				switch string(name) {
				case "type":
					return !rseen[0] && d.setString(&res.Type, &rseen[0])
				case "id":
					return !rseen[1] && d.setString(&res.Id, &rseen[1])
				case "tenant":
					return !rseen[2] && d.setString(&res.Tenant, &rseen[2])
				}
				return false
			})
		}
		return false
	})
	d.space()
	return ok && d.i == len(d.b)
}

// decodeValidateTokenRequest is decodeAuthorizeRequest for a
// ValidateTokenRequest: an object of at most the token field.
func decodeValidateTokenRequest(body []byte, req *authzv1.ValidateTokenRequest) bool {
	d := fastDecoder{b: body}
	seen := false
	ok := d.object(func(name []byte) bool {
		return string(name) == "token" && !seen && d.setString(&req.Token, &seen)
	})
	d.space()
	return ok && d.i == len(d.b)
}

// fastDecoder reads the subset of JSON decodeAuthorizeRequest accepts.
type fastDecoder struct {
	b []byte
	i int
}

// space skips JSON whitespace.
func (d *fastDecoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) consume(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object reads an object, calling field for each member after its name
// and colon; field reads the value. The name is a slice of the input:
// a string would be allocated for every call.
func (d *fastDecoder) object(field func(name []byte) bool) bool {
	if !d.consume('{') {
		return false
	}
	if d.consume('}') {
		return true
	}
	for {
		name, ok := d.plainString()
		if !ok || !d.consume(':') || !field(name) {
			return false
		}
		if d.consume('}') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// setString reads a string value into *dst and marks it seen.
func (d *fastDecoder) setString(dst *string, seen *bool) bool {
	s, ok := d.plainString()
	if !ok {
		return false
	}
	*dst, *seen = string(s), true
	return true
}

// plainString reads a string of valid UTF-8 without escapes or control
// characters, returning its contents (a slice of the input).
func (d *fastDecoder) plainString() ([]byte, bool) {
	if !d.consume('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, true
		case c == '\\' || c < ' ':
			return nil, false
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(d.b[d.i:])
			if r == utf8.RuneError && n == 1 {
				return nil, false
			}
			d.i += n
		default:
			d.i++
		}
	}
	return nil, false
}
