// Package apijson writes the JSON bodies of the sidecar's local HTTP API:
// indented documents, and the one error envelope every endpoint refuses
// with, {"error":{"code":"<kebab-code>","message":"..."}}. The admin
// endpoints, the dry-run sessions and the live streams share it, so that a
// client reads every refusal the same way.
package apijson

import (
	"encoding/json"
	"net/http"

	"github.com/svc-dev/svc/engine/reason"
)

// Write answers status with v as indented JSON.
func Write(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the status is sent: a failed write has no one to tell
}

// Error answers status with the error envelope of code and msg.
func Error(w http.ResponseWriter, status int, code reason.Code, msg string) {
	Write(w, status, map[string]any{"error": map[string]string{"code": string(code), "message": msg}})
}
