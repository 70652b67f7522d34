package oidcgw_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/svc-dev/svc/oidcgw"
)

// Anyone may post a logout token. One naming a key the provider's set
// does not hold has the set fetched again (a rotation), but a flood of
// such tokens costs the provider at most a few fetches a minute, not one
// each; the provider's own tokens still verify.
func TestForgedKeysBoundFetches(t *testing.T) {
	r := newRig(t, nil)
	b64 := base64.RawURLEncoding
	post := func(tok string) int {
		t.Helper()
		res, err := http.PostForm(r.url+"/auth/oidc/backchannel-logout", url.Values{"logout_token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for i := range 50 {
		header := b64.EncodeToString(fmt.Appendf(nil, `{"alg":"ES256","kid":"forged-%d"}`, i))
		payload := b64.EncodeToString([]byte(`{"iss":"` + r.op.URL + `","aud":"app"}`))
		if st := post(header + "." + payload + "." + b64.EncodeToString(make([]byte, 64))); st != http.StatusBadRequest {
			t.Fatalf("forged token %d: %d, want 400", i, st)
		}
	}
	if n := r.op.jwksCalls.Load(); n > 3 {
		t.Errorf("50 forged logout tokens had the provider's keys fetched %d times, want at most 3", n)
	}
	events := map[string]any{oidcgw.BackchannelLogoutEvent: map[string]any{}}
	if st := post(r.op.sign(t, "app", "ann", map[string]any{"sid": "sid-1", "events": events})); st != http.StatusOK {
		t.Errorf("the provider's logout token after the flood: %d, want 200", st)
	}
}
