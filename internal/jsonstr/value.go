package jsonstr

import (
	"bytes"
	"encoding/json"
)

// AppendValue appends v as encoding/json encodes it (object keys sorted,
// strings escaped as Append escapes them, with html as by default or as
// SetEscapeHTML(false) leaves them), through encoding/json itself: for
// values of any shape, such as a resource's attributes, that the
// hand-written encoders do not know. ok is false, and dst unchanged, when
// encoding/json cannot encode v.
func AppendValue(dst []byte, v any, html bool) (_ []byte, ok bool) {
	buf := bytes.NewBuffer(dst[len(dst):])
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(v); err != nil {
		return dst, false
	}
	out := buf.Bytes()
	// Encode ends the value with a newline.
	out = out[:len(out)-1]
	return append(dst, out...), true
}
