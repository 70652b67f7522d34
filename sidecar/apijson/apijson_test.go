package apijson_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc-dev/svc/engine/reason"
	"github.com/svc-dev/svc/sidecar/apijson"
)

func TestError(t *testing.T) {
	rec := httptest.NewRecorder()
	apijson.Error(rec, http.StatusConflict, reason.Code("too-many-sessions"), `at most 4 "sessions"`)
	want := "{\n  \"error\": {\n    \"code\": \"too-many-sessions\",\n    \"message\": \"at most 4 \\\"sessions\\\"\"\n  }\n}\n"
	if rec.Code != http.StatusConflict || rec.Header().Get("Content-Type") != "application/json" || rec.Body.String() != want {
		t.Errorf("answer = %d %s %q, want 409 application/json %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body, want)
	}
}
