package sidecar

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestUnknownAPIPathsAnswerJSON: a path under /v1/ that no endpoint has
// is a JSON 404 not-found, a known path asked with another method a JSON
// 405 with Allow, as every other refusal of the local API; the endpoints
// themselves still answer.
func TestUnknownAPIPathsAnswerJSON(t *testing.T) {
	r := startSidecar(t, devConfig())
	base := "http://" + r.HTTPAddr().String()
	tests := []struct {
		name, method, path string
		status             int
		code, allow        string
	}{
		{"unknown path", http.MethodGet, "/v1/nope", http.StatusNotFound, "not-found", ""},
		{"unknown path, POST", http.MethodPost, "/v1/authorise", http.StatusNotFound, "not-found", ""},
		{"deep unknown path", http.MethodGet, "/v1/status/extra", http.StatusNotFound, "not-found", ""},
		{"known path, wrong method", http.MethodGet, PathReloadPolicy, http.StatusMethodNotAllowed, "input-invalid", "POST"},
		{"status with DELETE", http.MethodDelete, PathStatus, http.StatusMethodNotAllowed, "input-invalid", "GET"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, base+tc.path, nil)
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code, Message string }
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("%s %s: body is not JSON: %v", tc.method, tc.path, err)
			}
			if resp.StatusCode != tc.status || body.Error.Code != tc.code || body.Error.Message == "" {
				t.Errorf("%s %s = %d %+v; want %d %s", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.code)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q", ct)
			}
			if got := resp.Header.Get("Allow"); !strings.Contains(got, tc.allow) || (tc.allow == "") != (got == "") {
				t.Errorf("Allow = %q; want %q", got, tc.allow)
			}
		})
	}
	if status, _ := get(t, r, PathStatus); status != http.StatusOK {
		t.Errorf("GET %s = %d", PathStatus, status)
	}
}
