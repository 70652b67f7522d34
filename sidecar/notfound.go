package sidecar

import (
	"net/http"
	"strings"

	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// apiPrefix is the root of the local API's versioned endpoints.
const apiPrefix = "/v1/"

// probeMethods are the methods tried to tell an unknown path from a known
// path asked with another method.
var probeMethods = [...]string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// registerNotFound answers every request under /v1/ that no endpoint
// takes with the JSON error envelope every other refusal uses (the mux's
// own answers are plain text): 404 not-found for a path no endpoint has,
// 405 with Allow for a known path asked with another method. It is
// registered last; the mux prefers every more specific pattern, so it
// runs only for requests that would otherwise be the mux's 404 or 405.
func registerNotFound(mux *http.ServeMux) {
	mux.HandleFunc(apiPrefix, func(w http.ResponseWriter, r *http.Request) {
		var allow []string
		for _, m := range probeMethods {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != apiPrefix && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			wire.WriteError(w, http.StatusMethodNotAllowed, wire.Indented, string(reason.InputInvalid),
				"use "+strings.Join(allow, " or ")+" for "+r.URL.Path)
			return
		}
		wire.WriteError(w, http.StatusNotFound, wire.Indented, string(reason.NotFound),
			"no endpoint at "+r.URL.Path+" (the endpoints are listed in docs/api.md)")
	})
}
