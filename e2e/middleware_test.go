package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit/servertest"
)

// sdkApp is an application protected by the Go SDK's middleware. It
// answers 200 with the authz.User the middleware stored.
func sdkApp(t *testing.T, sidecarAddr, failMode string, opts authz.MiddlewareOptions) *httptest.Server {
	t.Helper()
	// A timeout far above what a decision takes on a loaded machine: a
	// slow answer must not pass for a sidecar that is down.
	c, err := authz.NewClient(sidecarAddr, authz.ClientOptions{FailMode: failMode, Timeout: 30 * time.Second, Logger: servertest.QuietLogger()})
	if err != nil {
		t.Fatalf("authz.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return servertest.Protect(t, c, opts)
}

type appUser struct {
	Subject    string         `json:"subject"`
	TenantID   string         `json:"tenant_id"`
	Claims     map[string]any `json:"claims"`
	Reason     string         `json:"reason"`
	DecisionID string         `json:"decision_id"`
}

// TestMiddlewareFailModes runs the Go middleware against a running sidecar
// and then against the same sidecar stopped, in both fail modes, with the
// client talking gRPC (host:port) and the local HTTP API (http:// URL).
func TestMiddlewareFailModes(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	valid := k.token(t, "alice", "acme", "viewer")
	expiredClaims := harness.Claims("alice", "acme", "viewer")
	expiredClaims["exp"] = time.Now().Add(-time.Hour).Unix()
	expired := k.rsa.Token(t, expiredClaims)

	modes := []string{authz.FailOpen, authz.FailClosed}
	targets := map[string]string{"grpc": s.GRPCAddr, "http": "http://" + s.HTTPAddr}
	apps := map[string]*httptest.Server{}
	guarded := map[string]*httptest.Server{}
	for _, m := range modes {
		for tr, addr := range targets {
			apps[m+"/"+tr] = sdkApp(t, addr, m, authz.MiddlewareOptions{})
			guarded[m+"/"+tr] = sdkApp(t, addr, m, authz.MiddlewareOptions{
				Action: func(r *http.Request) string {
					if r.Method == http.MethodDelete {
						return "orders:delete"
					}
					return "orders:read"
				},
			})
		}
	}

	type tcase struct {
		name       string
		app        map[string]*httptest.Server
		method     string
		token      string
		want       int
		wantUser   string
		wantReason string
	}
	run := func(t *testing.T, key string, tc tcase) {
		t.Helper()
		status, h, body := harness.Send(t, tc.method, tc.app[key].URL+"/orders/42", "", map[string]string{"Authorization": harness.Bearer(tc.token)})
		if status != tc.want {
			t.Fatalf("got %s, want status %d", harness.Describe(status, h, body), tc.want)
		}
		switch status {
		case http.StatusOK:
			var u appUser
			if err := json.Unmarshal(body, &u); err != nil {
				t.Fatalf("app answer: %v: %s", err, body)
			}
			if u.Subject != tc.wantUser || u.Reason != tc.wantReason {
				t.Errorf("user = %+v, want subject %q reason %q", u, tc.wantUser, tc.wantReason)
			}
			if tc.wantReason == "fail-open" && u.Claims != nil {
				t.Errorf("fail-open user has claims %v, want none", u.Claims)
			}
			if tc.wantReason != "fail-open" && u.Claims["tenant_id"] != "acme" {
				t.Errorf("verified user claims = %v", u.Claims)
			}
		case http.StatusUnauthorized:
			if got := h.Get("WWW-Authenticate"); tc.token != "" && got == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			if d := parseDeny(t, string(body)); d.Reason != tc.wantReason {
				t.Errorf("deny reason = %q, want %q", d.Reason, tc.wantReason)
			}
		case http.StatusForbidden:
			if d := parseDeny(t, string(body)); !hasReason(d.DenyReasons, tc.wantReason) || d.DecisionID == "" {
				t.Errorf("deny body = %s, want reason %q and a decision id", body, tc.wantReason)
			}
		case http.StatusServiceUnavailable:
			if d := parseDeny(t, string(body)); d.Reason != tc.wantReason {
				t.Errorf("deny reason = %q, want %q", d.Reason, tc.wantReason)
			}
		}
	}

	running := []tcase{
		{"valid token", apps, "GET", valid, http.StatusOK, "alice", "ok"},
		{"expired token", apps, "GET", expired, http.StatusUnauthorized, "", "token-expired"},
		{"garbage token", apps, "GET", "garbage", http.StatusUnauthorized, "", "token-malformed"},
		{"missing token", apps, "GET", "", http.StatusUnauthorized, "", "token-missing"},
		{"policy allows", guarded, "GET", valid, http.StatusOK, "alice", "policy-allow"},
		{"policy denies", guarded, "DELETE", valid, http.StatusForbidden, "", "role-forbidden"},
	}
	for _, mode := range modes {
		for tr := range targets {
			for _, tc := range running {
				t.Run("running/"+mode+"/"+tr+"/"+tc.name, func(t *testing.T) { run(t, mode+"/"+tr, tc) })
			}
		}
	}

	s.Stop(t)

	stopped := map[string][]tcase{
		authz.FailOpen: {
			{"valid token", apps, "GET", valid, http.StatusOK, "anonymous", "fail-open"},
			{"policy route", guarded, "GET", valid, http.StatusOK, "anonymous", "fail-open"},
		},
		authz.FailClosed: {
			{"valid token", apps, "GET", valid, http.StatusServiceUnavailable, "", "unavailable"},
			{"policy route", guarded, "GET", valid, http.StatusServiceUnavailable, "", "unavailable"},
		},
	}
	for _, mode := range modes {
		for tr := range targets {
			for _, tc := range stopped[mode] {
				t.Run("stopped/"+mode+"/"+tr+"/"+tc.name, func(t *testing.T) { run(t, mode+"/"+tr, tc) })
			}
		}
	}
}
