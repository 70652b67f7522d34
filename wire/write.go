package wire

import (
	"encoding/json"
	"net/http"
)

// Layout is how a body is laid out: the decision API (/v1/authorize,
// /v1/validate-token) answers Compact lines, the admin API Indented
// documents that people read with curl.
type Layout int

// Layouts of a body.
const (
	// Compact is one line of JSON and a newline.
	Compact Layout = iota
	// Indented is JSON indented by two spaces, and a newline.
	Indented
)

// ErrorBody is the error envelope every endpoint of the local API refuses
// with: {"error":{"code":"<kebab-code>","message":"..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the error of an ErrorBody: a stable reason code and a
// message that never holds a token, a key or a claim value.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// encodeFailed is the body answered when a value cannot be encoded, which
// only a programming error causes.
const encodeFailed = `{"error":{"code":"policy-error","message":"response could not be encoded"}}` + "\n"

// WriteJSON answers status with v in layout, as application/json that no
// cache keeps and no browser sniffs.
func WriteJSON(w http.ResponseWriter, status int, layout Layout, v any) {
	var (
		b   []byte
		err error
	)
	if layout == Indented {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		b, status = []byte(encodeFailed), http.StatusInternalServerError
	} else {
		b = append(b, '\n')
	}
	WriteRaw(w, status, b)
}

// WriteRaw answers status with b, a JSON body already encoded, with the
// headers of WriteJSON.
func WriteRaw(w http.ResponseWriter, status int, b []byte) {
	// As h.Set with canonical keys, the values in one array rather than
	// a slice each; each slice is capped at its value, so that an Add
	// later appends to a copy.
	vals := &[3]string{"application/json", "no-store", "nosniff"}
	h := w.Header()
	h["Content-Type"] = vals[0:1:1]
	h["Cache-Control"] = vals[1:2:2]
	h["X-Content-Type-Options"] = vals[2:3:3]
	w.WriteHeader(status)
	_, _ = w.Write(b) // the status is sent: a failed write has no one to tell
}

// WriteError answers status with the error envelope of code and msg.
func WriteError(w http.ResponseWriter, status int, layout Layout, code, msg string) {
	WriteJSON(w, status, layout, ErrorBody{Error: ErrorDetail{Code: code, Message: msg}})
}
