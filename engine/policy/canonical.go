package policy

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"slices"
)

// OPA signs a bundle's data file by the digest of a canonical encoding of
// the document it decodes to (OPA's bundle/hash.go): objects with their
// keys sorted, keys and other values encoded by encoding/json without
// HTML escaping, numbers as spelt in the file, no white space. The
// functions here write that encoding of a compact tree, one leaf decoded
// at a time, so that a bundle's digests are checked without the whole
// document ever decoded at once.

// writeCanonical writes the canonical encoding of p to w.
func writeCanonical(w io.Writer, p pending) error {
	return canonicalOf(w, p.node, p.raw, newCanonicalEncoder())
}

func canonicalOf(w io.Writer, n *compactNode, raw []byte, ce *canonicalEncoder) error {
	if n == nil {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		walkCanonical(v, w, ce)
		return nil
	}
	_, _ = w.Write([]byte("{"))
	for i, k := range n.keys {
		if i > 0 {
			_, _ = w.Write([]byte(","))
		}
		_, _ = w.Write(ce.encode(k))
		_, _ = w.Write([]byte(":"))
		v := n.vals[i]
		if err := canonicalOf(w, v.node, v.raw, ce); err != nil {
			return err
		}
	}
	_, _ = w.Write([]byte("}"))
	return nil
}

// walkCanonical writes the canonical encoding of v, a decoded document,
// as OPA's bundle hasher does.
func walkCanonical(v any, w io.Writer, ce *canonicalEncoder) {
	switch x := v.(type) {
	case map[string]any:
		_, _ = w.Write([]byte("{"))
		for i, key := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				_, _ = w.Write([]byte(","))
			}
			_, _ = w.Write(ce.encode(key))
			_, _ = w.Write([]byte(":"))
			walkCanonical(x[key], w, ce)
		}
		_, _ = w.Write([]byte("}"))
	case []any:
		_, _ = w.Write([]byte("["))
		for i, e := range x {
			if i > 0 {
				_, _ = w.Write([]byte(","))
			}
			walkCanonical(e, w, ce)
		}
		_, _ = w.Write([]byte("]"))
	default:
		_, _ = w.Write(ce.encode(x))
	}
}

// canonicalEncoder encodes one value at a time, reusing its buffer.
type canonicalEncoder struct {
	buf *bytes.Buffer
	enc *json.Encoder
}

func newCanonicalEncoder() *canonicalEncoder {
	buf := new(bytes.Buffer)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	return &canonicalEncoder{buf: buf, enc: enc}
}

// encode returns the encoding of v, valid until the next call.
func (ce *canonicalEncoder) encode(v any) []byte {
	ce.buf.Reset()
	_ = ce.enc.Encode(v)
	return bytes.Trim(ce.buf.Bytes(), "\n")
}
