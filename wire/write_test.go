package wire_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/svc-dev/svc/wire"
)

// TestWriteError: one writer, one envelope, the same headers; the admin
// API's documents are indented, the decision API's answers one line.
func TestWriteError(t *testing.T) {
	tests := []struct {
		name   string
		layout wire.Layout
		want   string
	}{
		{"compact", wire.Compact, `{"error":{"code":"too-many-sessions","message":"at most 4 \"sessions\" \u003cnow\u003e"}}` + "\n"},
		{"indented", wire.Indented, "{\n  \"error\": {\n    \"code\": \"too-many-sessions\",\n    \"message\": \"at most 4 \\\"sessions\\\" \\u003cnow\\u003e\"\n  }\n}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			wire.WriteError(rec, http.StatusConflict, tt.layout, "too-many-sessions", `at most 4 "sessions" <now>`)
			if rec.Code != http.StatusConflict || rec.Body.String() != tt.want {
				t.Errorf("answer = %d %q, want 409 %q", rec.Code, rec.Body, tt.want)
			}
			for k, v := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"} {
				if got := rec.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

// TestWriteJSONUnencodable: a value that cannot be encoded is a 500 with
// the envelope, never a half-written body.
func TestWriteJSONUnencodable(t *testing.T) {
	rec := httptest.NewRecorder()
	wire.WriteJSON(rec, http.StatusOK, wire.Indented, map[string]any{"f": func() {}})
	want := `{"error":{"code":"policy-error","message":"response could not be encoded"}}` + "\n"
	if rec.Code != http.StatusInternalServerError || rec.Body.String() != want {
		t.Errorf("answer = %d %q, want 500 %q", rec.Code, rec.Body, want)
	}
}

// TestDenyBody: deny_reasons is never null; decision_id is always written
// by the proxy check and left out, when empty, by the middlewares.
func TestDenyBody(t *testing.T) {
	tests := []struct {
		name string
		body wire.DenyBody
		want string
	}{
		{"check without decision", wire.DenyBody{Reason: "input-invalid"},
			`{"allow":false,"deny_reasons":[],"reason":"input-invalid","decision_id":""}`},
		{"check with decision", wire.DenyBody{Reason: "policy-deny", DenyReasons: []string{"a", "b"}, DecisionID: "d-1"},
			`{"allow":false,"deny_reasons":["a","b"],"reason":"policy-deny","decision_id":"d-1"}`},
		{"middleware without decision", wire.DenyBody{Reason: "token-missing", OmitEmptyDecisionID: true},
			`{"allow":false,"deny_reasons":[],"reason":"token-missing"}`},
		{"middleware with decision", wire.DenyBody{Reason: "policy-deny", DenyReasons: []string{}, DecisionID: "d-2", OmitEmptyDecisionID: true},
			`{"allow":false,"deny_reasons":[],"reason":"policy-deny","decision_id":"d-2"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("DenyBody = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestParseDropped reads the drop notice and nothing else.
func TestParseDropped(t *testing.T) {
	for line, want := range map[string]uint64{`{"dropped":3,"type":"dropped"}`: 3, `{"type":"dropped","dropped":9}`: 9} {
		if n, ok := wire.ParseDropped([]byte(line)); !ok || n != want {
			t.Errorf("ParseDropped(%s) = %d, %v; want %d, true", line, n, ok, want)
		}
	}
	for _, line := range []string{`{"msg":"dropped"}`, `{"type":"log","dropped":1}`, `not json`, ``} {
		if _, ok := wire.ParseDropped([]byte(line)); ok {
			t.Errorf("ParseDropped(%q) = ok, want not a notice", line)
		}
	}
}

// TestWriteRawHeaders: WriteRaw sets its headers as http.Header.Set
// would, over any earlier value, and an Add to one of them afterwards
// leaves the others alone.
func TestWriteRawHeaders(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "text/plain")
	rec.Header().Add("Cache-Control", "max-age=1")
	rec.Header().Set("Allow", "POST")
	wire.WriteRaw(rec, http.StatusOK, []byte("{}\n"))
	want := http.Header{
		"Content-Type":           {"application/json"},
		"Cache-Control":          {"no-store"},
		"X-Content-Type-Options": {"nosniff"},
		"Allow":                  {"POST"},
	}
	if !reflect.DeepEqual(rec.Header(), want) {
		t.Fatalf("headers %v, want %v", rec.Header(), want)
	}
	rec.Header().Add("Content-Type", "x")
	rec.Header().Add("Cache-Control", "y")
	if got := rec.Header().Values("Cache-Control"); !reflect.DeepEqual(got, []string{"no-store", "y"}) {
		t.Errorf("Cache-Control %q after Add", got)
	}
	if got := rec.Header().Values("X-Content-Type-Options"); !reflect.DeepEqual(got, []string{"nosniff"}) {
		t.Errorf("X-Content-Type-Options %q after Add to its neighbours", got)
	}
}
