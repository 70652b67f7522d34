package authz_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine/apikey"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/servertest"
	"github.com/svc-dev/svc/reason"
)

// The middleware takes an API key from "Authorization: ApiKey" or
// X-Api-Key, as the proxies do, through the sidecar and in-process, and
// challenges a refused key in the ApiKey scheme.
func TestMiddlewareAPIKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api-keys.toml")
	_, viewer, err := apikey.Append(path, apikey.NewEntry{Tenant: servertest.Tenant, Subject: "reporting", Roles: []string{"viewer"}})
	if err != nil {
		t.Fatal(err)
	}
	id, revoked, err := apikey.Append(path, apikey.NewEntry{Tenant: servertest.Tenant, Subject: "old-job", Roles: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := apikey.Revoke(path, id); err != nil {
		t.Fatal(err)
	}
	p := servertest.NewIDP(t)
	eng := servertest.NewEngine(t, p, func(c *config.Config) { c.APIKeys.File = path })
	sidecar := servertest.ServeGRPC(t, servertest.NewServer(t, eng))
	for name, a := range map[string]authz.Authorizer{"sidecar": newClient(t, sidecar, authz.FailClosed), "in-process": server.Local(eng)} {
		url := servertest.Protect(t, a, authz.MiddlewareOptions{Action: routeAction}).URL
		tests := []struct {
			name      string
			method    string
			headers   map[string]string
			status    int
			reason    reason.Code
			challenge string
		}{
			{"X-Api-Key reads", http.MethodGet, map[string]string{"X-Api-Key": viewer}, 200, "", ""},
			{"ApiKey scheme reads", http.MethodGet, map[string]string{"Authorization": "apikey " + viewer}, 200, "", ""},
			{"viewer key deletes", http.MethodDelete, map[string]string{"X-Api-Key": viewer}, 403, reason.PolicyDeny, ""},
			{"revoked key", http.MethodGet, map[string]string{"X-Api-Key": revoked}, 401, reason.APIKeyRevoked,
				`ApiKey error="invalid_key", error_description="api-key-revoked"`},
			{"unknown key", http.MethodGet, map[string]string{"Authorization": "ApiKey " + testkit.WrongSecret(viewer)}, 401, reason.APIKeyUnknown,
				`ApiKey error="invalid_key", error_description="api-key-unknown"`},
			// A bearer scheme decides: X-Api-Key beside it is not read.
			{"bearer beside X-Api-Key", http.MethodGet, map[string]string{"Authorization": "Bearer junk", "X-Api-Key": viewer}, 401,
				reason.TokenMalformed, `Bearer error="invalid_token", error_description="token-malformed"`},
		}
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				req, _ := http.NewRequest(tt.method, url+"/orders/1", nil)
				for k, v := range tt.headers {
					req.Header.Set(k, v)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
				}
				if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
					t.Errorf("WWW-Authenticate %q, want %q", got, tt.challenge)
				}
				if tt.status == 200 {
					var u authz.User
					if err := json.NewDecoder(resp.Body).Decode(&u); err != nil || u.Subject != "reporting" || u.TenantID != servertest.Tenant {
						t.Errorf("user %+v (%v), want the key's subject reporting", u, err)
					}
					return
				}
				var body authz.DenyBody
				if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Reason != string(tt.reason) {
					t.Errorf("deny body %+v (%v), want reason %s", body, err, tt.reason)
				}
			})
		}
	}
}
