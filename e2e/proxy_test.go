package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// TestProxies puts nginx (auth_request) and Caddy (forward_auth) in front
// of an echoing upstream, both asking the sidecar's /check endpoint, and
// checks what reaches the upstream and what the client gets back.
func TestProxies(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)

	proxies := []struct {
		name  string
		start func(testing.TB, string, string) *harness.Proxy
		// denyBody: the proxy hands the sidecar's JSON deny body to the
		// client (Caddy does; nginx answers with its own error page).
		denyBody bool
	}{
		{"nginx auth_request", harness.StartNginx, false},
		{"caddy forward_auth", harness.StartCaddy, true},
	}

	viewer := k.token(t, "alice", "acme", "viewer")
	expiredClaims := harness.Claims("alice", "acme", "viewer")
	expiredClaims["exp"] = time.Now().Add(-10 * time.Minute).Unix()
	expired := k.rsa.Token(t, expiredClaims)
	foreign := k.token(t, "mallory", "globex", "admin")
	spoofed := map[string]string{
		"X-Svc-User-Id":     "root",
		"X-Svc-Tenant-Id":   "globex",
		"X-Svc-Roles":       "admin",
		"X-Svc-Decision-Id": "forged",
	}

	tests := []struct {
		name, method, path, token string
		headers                   map[string]string
		want                      int
		wantReason                string // for 403: a deny reason; for 401: the WWW-Authenticate error
	}{
		{"viewer reads", "GET", "/orders/42?expand=items", viewer, nil, http.StatusOK, ""},
		{"spoofed x-svc headers never reach the upstream", "GET", "/orders/42", viewer, spoofed, http.StatusOK, ""},
		{"missing token", "GET", "/orders/42", "", nil, http.StatusUnauthorized, ""},
		{"missing token with spoofed identity", "GET", "/orders/42", "", spoofed, http.StatusUnauthorized, ""},
		{"expired token", "GET", "/orders/42", expired, nil, http.StatusUnauthorized, `error="invalid_token"`},
		{"garbage token", "GET", "/orders/42", "garbage", nil, http.StatusUnauthorized, `error="invalid_token"`},
		{"another tenant", "GET", "/orders/42", foreign, nil, http.StatusForbidden, "tenant-mismatch"},
		{"method reaches the check", "DELETE", "/orders/42", viewer, nil, http.StatusForbidden, "role-forbidden"},
		{"path reaches the check", "GET", "/orders/42", k.token(t, "erin", "acme", "billing"), nil, http.StatusForbidden, "role-forbidden"},
	}

	for _, px := range proxies {
		t.Run(px.name, func(t *testing.T) {
			t.Parallel()
			up := harness.StartUpstream(t)
			p := px.start(t, s.HTTPAddr, up.Addr)
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					req, err := http.NewRequest(tc.method, p.URL+tc.path, nil)
					if err != nil {
						t.Fatal(err)
					}
					if tc.token != "" {
						req.Header.Set("Authorization", "Bearer "+tc.token)
					}
					for h, v := range tc.headers {
						req.Header.Set(h, v)
					}
					hits := up.Hits()
					status, h, body := harness.Do(t, req)
					if status != tc.want {
						t.Fatalf("got %s; want status %d", harness.Describe(status, h, body), tc.want)
					}
					if status != http.StatusOK {
						if up.Hits() != hits {
							t.Errorf("a refused request reached the upstream")
						}
						if h.Get("X-Upstream") != "" {
							t.Errorf("the refusal came from the upstream")
						}
					}
					switch status {
					case http.StatusOK:
						checkUpstreamSaw(t, harness.ParseEcho(t, body), tc.method, tc.path)
					case http.StatusUnauthorized:
						challenge := h.Get("WWW-Authenticate")
						if !strings.HasPrefix(challenge, "Bearer") || !strings.Contains(challenge, tc.wantReason) {
							t.Errorf("WWW-Authenticate = %q, want a Bearer challenge with %q", challenge, tc.wantReason)
						}
					case http.StatusForbidden:
						if px.denyBody {
							if d := parseDeny(t, string(body)); !hasReason(d.DenyReasons, tc.wantReason) {
								t.Errorf("deny_reasons = %q, want %q", d.DenyReasons, tc.wantReason)
							}
						}
					}
				})
			}
		})
	}
}

// checkUpstreamSaw asserts that the upstream received the request with the
// sidecar's identity headers, once each, and nothing the client forged.
func checkUpstreamSaw(t *testing.T, e harness.Echo, method, path string) {
	t.Helper()
	if e.Method != method || e.URI != path {
		t.Errorf("upstream saw %s %s, want %s %s", e.Method, e.URI, method, path)
	}
	want := map[string]string{"X-Svc-User-Id": "alice", "X-Svc-Tenant-Id": "acme", "X-Svc-Roles": "viewer"}
	for name, v := range want {
		if got := e.Header(name); len(got) != 1 || got[0] != v {
			t.Errorf("upstream saw %s = %q, want exactly [%q]", name, got, v)
		}
	}
	if got := e.Header("X-Svc-Decision-Id"); len(got) != 1 || got[0] == "" || got[0] == "forged" {
		t.Errorf("upstream saw X-Svc-Decision-Id = %q, want the sidecar's decision id only", got)
	}
	if got := e.Header("Authorization"); len(got) != 1 {
		t.Errorf("upstream saw Authorization %d times, want the client's header passed once", len(got))
	}
}
