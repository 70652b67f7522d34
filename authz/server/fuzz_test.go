package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/servertest"
)

// FuzzHTTPAuthorize sends arbitrary bodies and Authorization headers to
// POST /v1/authorize of a real development-mode engine: every answer must
// be one of the documented statuses with a JSON body of the documented
// shape, never a panic.
func FuzzHTTPAuthorize(f *testing.F) {
	for _, seed := range testkit.ReadGlob(f, filepath.Join("testdata", "http-requests", "*.json")) {
		f.Add(seed.Data, "")
		f.Add(seed.Data, "Bearer dev-token")
	}
	f.Add([]byte(`{"action":"orders:read"}`), "Bearer")
	f.Add([]byte(`{"action":"orders:read"}`), "bearer  spaced  ")

	mux := http.NewServeMux()
	s, err := server.New(servertest.NewEngine(f, nil, nil), server.Options{Logger: servertest.QuietLogger(), MaxBodyBytes: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	s.RegisterHTTP(mux)

	f.Fuzz(func(t *testing.T, body []byte, auth string) {
		req := httptest.NewRequest(http.MethodPost, authz.PathAuthorize, bytes.NewReader(body))
		if auth != "" {
			req.Header["Authorization"] = []string{auth}
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)

		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("Content-Type %q", ct)
		}
		switch rec.Code {
		case http.StatusOK:
			var resp authzv1.AuthorizeResponse
			if err := protojson.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("200 body is not an AuthorizeResponse: %v\n%s", err, rec.Body)
			}
			if resp.Reason == "" {
				t.Fatalf("decision without a reason: %s", rec.Body)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusServiceUnavailable:
			var e authz.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%d body is not an error body (%v): %s", rec.Code, err, rec.Body)
			}
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	})
}
