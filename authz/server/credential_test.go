package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine"
)

// credentials records the credential of every request it is asked.
type credentials struct{ got []engine.Credential }

func (c *credentials) Decide(_ context.Context, req engine.Request) (engine.Result, error) {
	c.got = append(c.got, req.Credential)
	return engine.Result{}, nil
}

// The HTTP API takes the credential from the body's token (an API key
// when it starts svck_), else from the ApiKey or X-Api-Key headers, else
// from a bearer Authorization header.
func TestHTTPCredential(t *testing.T) {
	const key = "svck_aeaqcaibaeaq_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE"
	tests := []struct {
		name    string
		body    string
		headers map[string]string
		want    engine.Credential
	}{
		{"bearer header", `{}`, map[string]string{"Authorization": "Bearer tok"}, engine.BearerToken("tok")},
		{"apikey header", `{}`, map[string]string{"Authorization": "ApiKey " + key}, engine.APIKey(key)},
		{"x-api-key", `{}`, map[string]string{"X-Api-Key": key}, engine.APIKey(key)},
		{"malformed x-api-key stays an api key", `{}`, map[string]string{"X-Api-Key": "nope"}, engine.APIKey("nope")},
		{"bearer over x-api-key", `{}`, map[string]string{"Authorization": "Bearer tok", "X-Api-Key": key}, engine.BearerToken("tok")},
		{"key in the token field", `{"token":"` + key + `"}`, nil, engine.APIKey(key)},
		{"body token over headers", `{"token":"tok"}`, map[string]string{"X-Api-Key": key}, engine.BearerToken("tok")},
	}
	for _, path := range []string{authz.PathValidateToken, authz.PathAuthorize} {
		for _, tt := range tests {
			t.Run(path+"/"+tt.name, func(t *testing.T) {
				rec := &credentials{}
				s, err := server.New(rec, server.Options{})
				if err != nil {
					t.Fatal(err)
				}
				mux := http.NewServeMux()
				s.RegisterHTTP(mux)
				body := tt.body
				if path == authz.PathAuthorize {
					body = strings.Replace(body, "{", `{"action":"orders:read",`, 1)
					body = strings.Replace(body, ",}", "}", 1)
				}
				req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
				for k, v := range tt.headers {
					req.Header.Set(k, v)
				}
				w := httptest.NewRecorder()
				mux.ServeHTTP(w, req)
				if len(rec.got) != 1 || rec.got[0] != tt.want {
					t.Fatalf("%d %s: credentials %+v, want %+v", w.Code, w.Body, rec.got, tt.want)
				}
			})
		}
	}
}
