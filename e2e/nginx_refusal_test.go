package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/refusalpage"
)

// TestShippedNginxRefusalHeaders: behind the shipped
// deploy/nginx/nginx.conf, whose @svc_denied location writes the refusal
// itself, a browser's refused request gets the HTML page with the
// sidecar's Content-Security-Policy and X-Content-Type-Options: nosniff,
// as the sidecar sends them; an API client's JSON refusal gets them too.
func TestShippedNginxRefusalHeaders(t *testing.T) {
	t.Parallel()
	k, _, up, front := startBehindShippedNginx(t)

	for _, tc := range []struct {
		name, method, accept, token string
		want                        int
		wantType, wantBody          string
	}{
		{"browser without a session", http.MethodGet, browserAccept, "", http.StatusUnauthorized, "text/html; charset=utf-8", "<code>token-missing</code>"},
		{"browser posting without a session", http.MethodPost, browserAccept, "", http.StatusUnauthorized, "text/html; charset=utf-8", "<code>token-missing</code>"},
		{"API client denied by the policy", http.MethodDelete, "application/json", k.token(t, "u-viewer", "acme", "viewer"), http.StatusForbidden, "application/json", `"reason":"policy-deny"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, front+"/orders/1", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", tc.accept)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			status, h, body := harness.Do(t, req)
			if status != tc.want || h.Get("Content-Type") != tc.wantType || !strings.Contains(string(body), tc.wantBody) {
				t.Fatalf("%s, want %d %s with %s", harness.Describe(status, h, body), tc.want, tc.wantType, tc.wantBody)
			}
			for name, want := range map[string]string{
				"Content-Security-Policy": refusalpage.ContentSecurityPolicy,
				"X-Content-Type-Options":  "nosniff",
				"Cache-Control":           "no-store",
			} {
				if got := h.Values(name); len(got) != 1 || got[0] != want {
					t.Errorf("%s = %q, want one %q", name, got, want)
				}
			}
		})
	}
	if up.Hits() != 0 {
		t.Errorf("%d refused requests reached the upstream", up.Hits())
	}
}
