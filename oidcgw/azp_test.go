package oidcgw_test

import (
	"net/http"
	"testing"

	"github.com/svc-dev/svc/reason"
)

// OpenID Connect Core 3.1.3.7: an ID token with several audiences must
// name this client as its authorized party (azp), and an azp, when
// there is one, must be this client. Otherwise the token was issued to
// another client, which this one merely appears beside in aud.
func TestIDTokenAuthorizedParty(t *testing.T) {
	for _, tt := range []struct {
		name   string
		claims map[string]any
		want   reason.Code // "" for a sign-in
	}{
		{"several audiences, no azp", map[string]any{"aud": []string{"app", "other-app"}}, reason.OIDCAudienceMismatch},
		{"several audiences, azp another client", map[string]any{"aud": []string{"app", "other-app"}, "azp": "other-app"}, reason.OIDCAudienceMismatch},
		{"one audience, azp another client", map[string]any{"azp": "other-app"}, reason.OIDCAudienceMismatch},
		{"several audiences, azp this client", map[string]any{"aud": []string{"app", "other-app"}, "azp": "app"}, ""},
		{"one audience, azp this client", map[string]any{"azp": "app"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t, nil)
			for k, v := range tt.claims {
				r.op.claims[k] = v
			}
			b := browser(t)
			res, body := get(t, b, r.toCallback(t, b, "/"))
			if tt.want == "" {
				if res.StatusCode != http.StatusSeeOther {
					t.Fatalf("%d %s, want a sign-in", res.StatusCode, body)
				}
				return
			}
			wantRefused(t, "callback", res, body, tt.want)
		})
	}
}
