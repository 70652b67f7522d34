package config

import (
	"errors"
	"strconv"
	"strings"
)

// ErrInvalid matches every configuration error with errors.Is.
var ErrInvalid = errors.New("invalid configuration")

// ErrUnknownKey matches, with errors.Is, an error about a key that the
// configuration does not have (often a misspelling).
var ErrUnknownKey = errors.New("unknown configuration key")

// Error is one configuration problem. It names the key and where the value
// came from, and reads like
//
//	svc.toml: sdk.fail_mode: must be "open" or "closed", got "x"
//	svc.toml:3:1: sdk.jwks_ur: unknown key
//	SVC_FAIL_MODE: must be "open" or "closed", got "maybe"
//
// When Source is an SVC_* environment variable the key is left out of the
// message, since each variable sets exactly one key.
type Error struct {
	// Source is the file path, the SVC_* environment variable, or "" for
	// a configuration built in code.
	Source string
	// Line and Column locate the problem in the file when the decoder
	// knows where it is (1-based; 0 when unknown).
	Line, Column int
	// Key is the full dotted key path, such as "sdk.fail_mode" or
	// "sidecar.routes[0].path"; "" for problems of the whole file.
	Key string
	// Msg says what is wrong. It never holds secret material.
	Msg string
	// Err is the underlying cause, for errors.Is and errors.As; its text
	// is already part of Msg.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
			if e.Column > 0 {
				b.WriteString(":" + strconv.Itoa(e.Column))
			}
		}
		b.WriteString(": ")
	}
	if e.Key != "" && envKey(e.Source) != e.Key {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalid, which every Error matches.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Errors returns every *Error inside err, which may be a single *Error or
// a list joined with errors.Join, in order. It returns nil when err holds
// none.
func Errors(err error) []*Error {
	if err == nil {
		return nil
	}
	if ce, ok := err.(*Error); ok {
		return []*Error{ce}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*Error
		for _, e := range j.Unwrap() {
			out = append(out, Errors(e)...)
		}
		return out
	}
	return Errors(errors.Unwrap(err))
}

// join returns nil for no errors, the *Error itself for one, and an
// errors.Join list otherwise.
func join(errs []*Error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	list := make([]error, len(errs))
	for i, e := range errs {
		list[i] = e
	}
	return errors.Join(list...)
}

// keyPath joins key segments into a dotted path. Segments that are not
// bare TOML keys are quoted; index segments ("[0]") attach to the previous
// segment.
func keyPath(segs ...string) string {
	var b strings.Builder
	for i, s := range segs {
		if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") && i > 0 {
			b.WriteString(s)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(s) {
			b.WriteString(s)
		} else {
			b.WriteString(strconv.Quote(s))
		}
	}
	return b.String()
}

// isBareKey reports whether s can be written unquoted as a TOML key.
func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

// index returns the key segment of a list element.
func index(i int) string { return "[" + strconv.Itoa(i) + "]" }
