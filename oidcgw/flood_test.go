package oidcgw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/oidcgw"
)

// TestLoginFloodKeepsLogouts: anyone can start a sign-in, and a gateway
// without Redis keeps each in memory. A flood of logins from one client
// (a few seconds of requests) pushes out the oldest pending sign-ins; it
// never refuses the provider's back-channel logout, which would leave
// the session it ends valid, nor a later sign-in.
func TestLoginFloodKeepsLogouts(t *testing.T) {
	if testkit.RaceEnabled {
		// Half a minute of logins there; TestEvictingStore covers the
		// store under the race detector.
		t.Skip("a hundred thousand logins are slow under the race detector")
	}
	r := newRig(t, nil)
	h := r.gw.Handler()
	refused := 0
	for range oidcgw.MaxPendingSignIns + 1000 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/auth/oidc/login", nil))
		if w.Code != http.StatusFound {
			refused++
		}
	}
	if refused > 0 {
		t.Errorf("%d logins of the flood refused, want none", refused)
	}
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	res, err := http.PostForm(r.url+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {r.op.sign(t, "app", "ann", map[string]any{"sid": "sid-1", "events": events})}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("back-channel logout after the flood: %d, want 200", res.StatusCode)
	}
	if revoked, err := r.gw.Revoked(context.Background(), map[string]any{"idp": "default", "idp_sid": "sid-1", "sub": "ann"}); err != nil || !revoked {
		t.Fatalf("the session the logout names: revoked %v %v", revoked, err)
	}
	b := browser(t)
	if res, body := get(t, b, r.toCallback(t, b, "/")); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in after the flood: %d %s, want 303", res.StatusCode, body)
	}
}
