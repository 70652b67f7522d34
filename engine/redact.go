package engine

import (
	"net/url"
	"slices"
	"strings"

	"github.com/svc-dev/svc/internal/jsonstr"
)

// Redacted replaces a value RedactedInput hides.
const Redacted = "[REDACTED]"

// visibleHeaders are the request headers RedactedInput shows; any other
// header may carry a credential or personal data.
var visibleHeaders = map[string]bool{
	"accept": true, "content-type": true, "user-agent": true, "x-request-id": true,
	"traceparent": true, ":method": true, ":path": true, ":authority": true,
}

// RedactedInput is in as JSON for a person to read, with what identifies
// beyond the subject hidden: every claim except sub (user.id), tenant_id
// and the roles is replaced by Redacted (user.email and each
// user.claims and identity.claims value), and so are request header values other than a few
// harmless ones, the query values, and the query names that
// QueryNameShown does not show (one member Redacted stands for them all).
// The request's path is RedactedPath's: the policy saw the path a caller
// of Authorize sent with its query, a person reads it without the values.
func RedactedInput(in Input) []byte {
	return AppendRedactedInput(make([]byte, 0, 512), &in)
}

// AppendRedactedInput appends RedactedInput(*in) to b without copying
// the input: the redaction happens as it is written, in the bytes
// encoding/json would write for the redacted copy (keys of maps sorted,
// strings escaped alike). Decision records are built with it on the path
// of every decision.
func AppendRedactedInput(b []byte, in *Input) []byte {
	return appendRedactedInput(b, in, nil)
}

// appendRedactedInput is AppendRedactedInput with the request's headers
// and query read from src when the request does not hold them.
func appendRedactedInput(b []byte, in *Input, src RequestSource) []byte {
	b = append(b, `{"action":`...)
	b = jsonstr.Append(b, in.Action, true)
	u := &in.User
	b = append(b, `,"user":{"id":`...)
	b = jsonstr.Append(b, u.ID, true)
	b = append(b, `,"role":`...)
	b = jsonstr.Append(b, u.Role, true)
	b = append(b, `,"roles":`...)
	b = appendStrings(b, u.Roles)
	b = append(b, `,"tenant_id":`...)
	b = jsonstr.Append(b, u.TenantID, true)
	if u.Email != "" {
		b = append(b, `,"email":"`+Redacted+`"`...)
	}
	b = append(b, `,"claims":`...)
	b = appendRedactedMap(b, u.Claims, nil)
	r := &in.Resource
	b = append(b, `},"resource":{`...)
	if r.Type != "" {
		b = append(b, `"type":`...)
		b = jsonstr.Append(b, r.Type, true)
		b = append(b, ',')
	}
	b = append(b, `"id":`...)
	b = jsonstr.Append(b, r.ID, true)
	b = append(b, `,"tenant":`...)
	b = jsonstr.Append(b, r.Tenant, true)
	if len(r.Attributes) > 0 {
		// Attributes are data the application chose to send about the
		// resource, shown as they are; left out when they are not JSON
		// (the policy rejects such an input).
		n := len(b)
		b = append(b, `,"attributes":`...)
		var ok bool
		if b, ok = jsonstr.AppendValue(b, r.Attributes, true); !ok {
			b = b[:n]
		}
	}
	b = append(b, `},"tenant":{"id":`...)
	b = jsonstr.Append(b, in.Tenant.ID, true)
	b = append(b, `,"plan":`...)
	b = jsonstr.Append(b, in.Tenant.Plan, true)
	b = append(b, '}')
	if q := in.Request; q != nil {
		b = append(b, `,"request":{"method":`...)
		b = jsonstr.Append(b, q.Method, true)
		b = append(b, `,"path":`...)
		b = jsonstr.Append(b, RedactedPath(q.Path), true)
		if q.Host != "" {
			b = append(b, `,"host":`...)
			b = jsonstr.Append(b, q.Host, true)
		}
		query, headers := q.Query, q.Headers
		if src != nil {
			query = src.SourceQuery()
		}
		if len(query) > 0 {
			b = append(b, `,"query":`...)
			b = appendRedactedQuery(b, query)
		}
		if src != nil {
			b = appendSourceHeaders(b, src)
		} else if len(headers) > 0 {
			b = append(b, `,"headers":`...)
			b = appendRedactedMap(b, headers, visibleHeader)
		}
		if q.SourceIP != "" {
			b = append(b, `,"source_ip":`...)
			b = jsonstr.Append(b, q.SourceIP, true)
		}
		b = append(b, `,"canonical_path":`...)
		b = jsonstr.Append(b, q.CanonicalPath, true)
		b = append(b, `,"format":`...)
		b = jsonstr.Append(b, q.Format, true)
		b = append(b, '}')
	}
	if id := in.Identity; id != nil {
		b = append(b, `,"identity":{"kind":`...)
		b = jsonstr.Append(b, id.Kind, true)
		b = append(b, `,"id":`...)
		b = jsonstr.Append(b, id.ID, true)
		b = append(b, `,"tenant_id":`...)
		b = jsonstr.Append(b, id.TenantID, true)
		b = append(b, `,"roles":`...)
		b = appendStrings(b, id.Roles)
		if id.Issuer != "" {
			b = append(b, `,"issuer":`...)
			b = jsonstr.Append(b, id.Issuer, true)
		}
		if id.Method != "" {
			b = append(b, `,"method":`...)
			b = jsonstr.Append(b, id.Method, true)
		}
		b = append(b, `,"claims":`...)
		b = appendRedactedMap(b, id.Claims, nil)
		b = append(b, '}')
	}
	return append(b, '}')
}

// visibleHeader reports whether the value of header k is shown: the
// keys of visibleHeaders, in any case. A switch, not a look-up in the
// map, which hashed every header's name of every decision record.
func visibleHeader(k string) bool {
	switch k {
	case "accept", "content-type", "user-agent", "x-request-id", "traceparent", ":method", ":path", ":authority":
		return true
	}
	if len(k) > len("content-type") || !hasUpper(k) {
		return false
	}
	return visibleHeaders[strings.ToLower(k)]
}

// hasUpper reports whether s holds an ASCII capital letter.
func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// appendStrings appends v as a JSON array, null when nil.
func appendStrings(b []byte, v []string) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstr.Append(b, s, true)
	}
	return append(b, ']')
}

// appendRedactedMap appends m as a JSON object, keys sorted, null when
// nil, each value Redacted unless visible says its key's is shown (then
// m's value, a string).
func appendRedactedMap[V any](b []byte, m map[string]V, visible func(string) bool) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	if len(m) > smallMap {
		return appendRedactedKeys(b, jsonstr.SortedKeys(nil, m), m, visible)
	}
	var e entries[V]
	for k, v := range m {
		e.add(k, v)
	}
	return e.appendRedacted(b, visible)
}

// maxQueryName is the longest query parameter name QueryNameShown shows.
const maxQueryName = 64

// QueryNameShown reports whether a redacted input shows the name k of a
// query parameter whose value is v: a name made like a parameter's, of
// 1 to maxQueryName ASCII letters, digits, '_', '-' and '.', and '[' and
// ']' after the first byte ("filter[status]", "ids[]"), of a parameter
// with a value. Any other name may be data itself: a credential sent as
// a parameter without a value ("?eyJhbGciOi..."), or one whose "="
// was percent-encoded ("?access_token%3Dabc" names "access_token=abc").
// No shown name is Redacted, which starts with '['.
func QueryNameShown(k, v string) bool {
	if v == "" || k == "" || len(k) > maxQueryName {
		return false
	}
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-', c == '.':
		case (c == '[' || c == ']') && i > 0:
		default:
			return false
		}
	}
	return true
}

// RedactedPath is the request path p as a redacted input shows it: what
// follows its first '?' is a query, whose values are Redacted and whose
// names are shown as the query's are (QueryNameShown, each name
// percent-decoded; a name hidden, or without a value, is written
// Redacted alone). A proxy's path has no query (a decoded "%3F" is read
// as one all the same); a caller of Authorize may send one in the path,
// with credentials in it ("/orders/1?access_token=...").
func RedactedPath(p string) string {
	path, query, ok := strings.Cut(p, "?")
	if !ok {
		return p
	}
	var sb strings.Builder
	sb.Grow(len(p) + len(Redacted))
	sb.WriteString(path)
	sb.WriteByte('?')
	for i := 0; ; i++ {
		part, rest, more := strings.Cut(query, "&")
		if i > 0 {
			sb.WriteByte('&')
		}
		if part != "" {
			name, value, _ := strings.Cut(part, "=")
			if n, err := url.QueryUnescape(name); err == nil && QueryNameShown(n, value) {
				sb.WriteString(n)
				sb.WriteString("=" + Redacted)
			} else {
				sb.WriteString(Redacted)
			}
		}
		if !more {
			return sb.String()
		}
		query = rest
	}
}

// appendRedactedQuery appends the query q as appendRedactedMap writes it
// with every value Redacted, and the names QueryNameShown hides replaced
// by one member Redacted.
func appendRedactedQuery(b []byte, q map[string]string) []byte {
	if q == nil {
		return append(b, "null"...)
	}
	if len(q) > smallMap {
		keys := make([]string, 0, len(q))
		for k, v := range q {
			if !QueryNameShown(k, v) {
				k = Redacted
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return appendRedactedKeys(b, slices.Compact(keys), q, nil)
	}
	var e entries[string]
	hidden := false
	for k, v := range q {
		if !QueryNameShown(k, v) {
			if hidden {
				continue
			}
			k, hidden = Redacted, true
		}
		e.add(k, v)
	}
	return e.appendRedacted(b, nil)
}

// appendSourceHeaders appends the member "headers" of the request whose
// headers src holds, as appendRedactedMap writes Headers, or nothing
// when src keeps none.
func appendSourceHeaders(b []byte, src RequestSource) []byte {
	h := src.SourceHeaders()
	if len(h) > smallMap {
		var keys []string
		for k := range h {
			if src.KeepHeader(k) {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return b
		}
		slices.Sort(keys)
		b = append(b, `,"headers":`...)
		return appendRedactedKeys(b, keys, h, visibleHeader)
	}
	var e entries[string]
	for k, v := range h {
		if src.KeepHeader(k) {
			e.add(k, v)
		}
	}
	if e.n == 0 {
		return b
	}
	b = append(b, `,"headers":`...)
	return e.appendRedacted(b, visibleHeader)
}

// smallMap is the most entries a map of the input may have to be written
// from entries, on the stack; larger ones are written from their keys
// sorted in a slice and their values looked up.
const smallMap = 24

// entries are those of a small map, as its iteration gives them, with
// their order by key: sorting the indexes, not the strings, and taking
// the values as they come, spares the map look-ups and the write
// barriers of moving strings while the GC runs, which were half of
// writing the headers.
type entries[V any] struct {
	keys  [smallMap]string
	vals  [smallMap]V
	order [smallMap]uint8
	n     int
}

// add appends an entry, keeping order sorted by key (an insertion:
// small maps).
func (e *entries[V]) add(k string, v V) {
	i := e.n
	e.keys[i], e.vals[i] = k, v
	j := i
	for j > 0 && e.keys[e.order[j-1]] > k {
		e.order[j] = e.order[j-1]
		j--
	}
	e.order[j] = uint8(i)
	e.n++
}

// appendRedacted is appendRedactedKeys of the entries.
func (e *entries[V]) appendRedacted(b []byte, visible func(string) bool) []byte {
	b = append(b, '{')
	for i, o := range e.order[:e.n] {
		if i > 0 {
			b = append(b, ',')
		}
		k := e.keys[o]
		b = jsonstr.Append(b, k, true)
		b = append(b, ':')
		if visible != nil && visible(k) {
			if s, ok := any(e.vals[o]).(string); ok {
				b = jsonstr.Append(b, s, true)
				continue
			}
		}
		b = append(b, `"`+Redacted+`"`...)
	}
	return append(b, '}')
}

// appendRedactedKeys appends the entries of m under keys, in their order,
// as a JSON object whose values are Redacted unless visible says its
// key's is shown (then m's value, a string).
func appendRedactedKeys[V any](b []byte, keys []string, m map[string]V, visible func(string) bool) []byte {
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonstr.Append(b, k, true)
		b = append(b, ':')
		if visible != nil && visible(k) {
			if s, ok := any(m[k]).(string); ok {
				b = jsonstr.Append(b, s, true)
				continue
			}
		}
		b = append(b, `"`+Redacted+`"`...)
	}
	return append(b, '}')
}
