package harness

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// checkServer answers like the sidecar's /check endpoint for the proxy
// configurations' own tests: "Bearer good" is allowed with x-svc headers,
// "Bearer other" is forbidden, anything else is unauthorized. It records
// the original method and URI each proxy passed.
type checkServer struct {
	mu   sync.Mutex
	seen []string
}

func (c *checkServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.Header.Get("X_Svc_Method") + r.Header.Get("X-Forwarded-Method")
	uri := r.Header.Get("X-Original-URI") + r.Header.Get("X-Forwarded-Uri")
	c.mu.Lock()
	c.seen = append(c.seen, r.URL.Path+" "+method+" "+uri)
	c.mu.Unlock()
	switch r.Header.Get("Authorization") {
	case "Bearer good":
		w.Header().Set("X-Svc-User-Id", "alice")
		w.Header().Set("X-Svc-Tenant-Id", "acme")
		w.Header().Set("X-Svc-Roles", "viewer")
		w.Header().Set("X-Svc-Decision-Id", "d-1")
		w.WriteHeader(http.StatusOK)
	case "Bearer other":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"allow":false,"deny_reasons":["tenant-mismatch"],"reason":"policy-deny","decision_id":"d-2"}`))
	default:
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
	}
}

func (c *checkServer) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) == 0 {
		return ""
	}
	return c.seen[len(c.seen)-1]
}

// TestProxyConfigs checks the generated nginx and Caddy configurations
// against a stand-in check endpoint: the original request reaches the
// check, allowed requests reach the upstream with the check's headers and
// none of the client's forged ones, refusals come back to the client.
func TestProxyConfigs(t *testing.T) {
	proxies := []struct {
		name  string
		start func(testing.TB, string, string) *Proxy
	}{
		{"nginx", StartNginx},
		{"caddy", StartCaddy},
	}
	for _, px := range proxies {
		t.Run(px.name, func(t *testing.T) {
			t.Parallel()
			check := &checkServer{}
			cs := httptest.NewServer(check)
			t.Cleanup(cs.Close)
			up := StartUpstream(t)
			p := px.start(t, cs.Listener.Addr().String(), up.Addr)

			tests := []struct {
				name, auth string
				want       int
			}{
				{"allowed", "Bearer good", http.StatusOK},
				{"forbidden", "Bearer other", http.StatusForbidden},
				{"unauthorized", "Bearer bad", http.StatusUnauthorized},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					req, err := http.NewRequest(http.MethodPatch, p.URL+"/orders/42?x=1", nil)
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Authorization", tc.auth)
					req.Header.Set("X-Svc-User-Id", "root")
					req.Header.Set("X-Svc-Tenant-Id", "globex")
					hits := up.Hits()
					status, h, body := Do(t, req)
					if status != tc.want {
						t.Fatalf("got %s, want %d", Describe(status, h, body), tc.want)
					}
					if got, want := check.last(), "/check PATCH /orders/42?x=1"; got != want {
						t.Errorf("check saw %q, want %q", got, want)
					}
					switch status {
					case http.StatusOK:
						e := ParseEcho(t, body)
						for name, v := range map[string]string{"X-Svc-User-Id": "alice", "X-Svc-Tenant-Id": "acme", "X-Svc-Roles": "viewer", "X-Svc-Decision-Id": "d-1"} {
							if got := e.Header(name); len(got) != 1 || got[0] != v {
								t.Errorf("upstream saw %s = %q, want [%q]", name, got, v)
							}
						}
						if e.Method != http.MethodPatch || e.URI != "/orders/42?x=1" {
							t.Errorf("upstream saw %s %s", e.Method, e.URI)
						}
					case http.StatusUnauthorized:
						if up.Hits() != hits {
							t.Error("refused request reached the upstream")
						}
						if got := h.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) {
							t.Errorf("WWW-Authenticate = %q", got)
						}
					case http.StatusForbidden:
						if up.Hits() != hits {
							t.Error("refused request reached the upstream")
						}
						if px.name == "caddy" && !strings.Contains(string(body), "tenant-mismatch") {
							t.Errorf("caddy did not pass the deny body: %s", body)
						}
					}
				})
			}
		})
	}
}
