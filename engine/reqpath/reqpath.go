// Package reqpath reads a request path the way the route table does and
// the way policies see it: Clean splits a request target into its decoded
// segments and the normalized path (input.request.path); Canon turns it
// into the canonical path (input.request.canonical_path), lower-cased and
// without a format suffix, which is the one spelling a policy can compare
// with "==" or startswith without being bypassed by "/API/Export" or
// "/api/export.json".
//
// Everything here parses what a client sent, so every function refuses
// rather than guesses: a path with no single meaning is an error carrying
// reason.PathInvalid.
package reqpath

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/svc-dev/svc/reason"
)

// Clean turns a request target's path ("/api/orders/%31?x=1") into its
// decoded segments and the normalized path the policy sees, appending the
// segments to buf[:0] when it has room for them (a caller's array keeps
// the common case free of allocations).
//
// The query and fragment are cut off first. Each segment is then
// percent-decoded on its own, and empty and "." segments are dropped and
// ".." removes the segment before it (also when written "%2e%2e"), so
// "/public/../admin" is judged as "/admin", the resource an upstream that
// resolves dot segments would serve.
//
// Upstreams disagree on what else a path means: Tomcat, Spring and Jetty
// cut a ";" path parameter off each segment ("/public/..;/admin" is their
// "/admin"), nginx and WSGI servers decode "%2F" and "%5C" into separators,
// IIS and some frameworks take "\" for "/". A path holding any of ";", "\",
// or an encoded "/", "\" or ";" therefore has no single meaning and is
// refused with reason.PathInvalid, as is a target that does not start with
// "/", holds a malformed escape, decodes to invalid UTF-8 or holds a control
// character (raw or encoded; NUL ends the path in C): guessing what
// the upstream makes of it could authorize one resource and serve another.
//
// The normalized path escapes "%" as "%25", so that decoding it once more
// gives the same segments: it is target itself when target was already
// normalized.
func Clean(target string, buf []string) (segs []string, normalized string, err error) {
	p := target
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	if !strings.HasPrefix(p, "/") {
		return nil, "", reason.New(reason.PathInvalid, "request path must start with \"/\"")
	}
	if strings.ContainsAny(p, ";\\") {
		return nil, "", reason.New(reason.PathInvalid, "request path holds \";\" or \"\\\", which upstreams read differently")
	}
	if n := strings.Count(p, "/"); n <= cap(buf) {
		segs = buf[:0]
	} else {
		segs = make([]string, 0, n)
	}
	for raw := range strings.SplitSeq(p[1:], "/") {
		seg := raw
		if strings.IndexByte(raw, '%') >= 0 {
			seg, err = url.PathUnescape(raw)
			if err != nil {
				return nil, "", reason.New(reason.PathInvalid, "request path holds a malformed percent-escape")
			}
			if strings.ContainsAny(seg, "/;\\") {
				return nil, "", reason.New(reason.PathInvalid, "request path holds an encoded \"/\", \"\\\" or \";\", which upstreams read differently")
			}
		}
		if !utf8.ValidString(seg) {
			return nil, "", reason.New(reason.PathInvalid, "request path is not valid UTF-8")
		}
		if hasControl(seg) {
			return nil, "", reason.New(reason.PathInvalid, "request path holds a control character")
		}
		switch seg {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, seg)
		}
	}
	if strings.IndexByte(p, '%') < 0 && IsJoin(p, segs) {
		// Already normalized: the segments are p's own, none needing an
		// escape, and nothing was dropped.
		return segs, p, nil
	}
	return segs, JoinEscaped(segs), nil
}

// IsJoin reports whether p is "/" followed by segs joined with "/" ("/"
// for none).
func IsJoin(p string, segs []string) bool {
	if len(segs) == 0 {
		return p == "/"
	}
	for _, s := range segs {
		if len(p) < 1+len(s) || p[0] != '/' || p[1:1+len(s)] != s {
			return false
		}
		p = p[1+len(s):]
	}
	return p == ""
}

// hasControl reports whether s holds an ASCII control character. NUL
// ends the path for servers in C ("/admin%00/../public" is their "/admin"),
// and CR, LF or TAB in a resource id would reach headers and logs.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// JoinEscaped builds the normalized path from decoded segments, escaping
// "%" so that the result decodes back to the same segments (Clean refuses
// segments holding "/").
func JoinEscaped(segs []string) string {
	if len(segs) == 0 {
		return "/"
	}
	n := 0
	for _, s := range segs {
		n += len(s) + 1
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range segs {
		b.WriteByte('/')
		if !strings.ContainsAny(s, "/%") {
			b.WriteString(s)
			continue
		}
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '/':
				b.WriteString("%2F")
			case '%':
				b.WriteString("%25")
			default:
				b.WriteByte(s[i])
			}
		}
	}
	return b.String()
}
