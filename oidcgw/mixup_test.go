package oidcgw_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
)

// TestMixUpRefused: providers share one redirect URL, so the callback's
// iss (RFC 9207) is what says which provider answered. A provider that
// sends the browser on to another with the authorization request of its
// own sign-in (a mix-up) gets neither the other's code nor the PKCE
// verifier: the callback refuses an iss that is not its sign-in's
// provider's, and one that is missing where the provider says it sends
// it, before the code goes anywhere.
func TestMixUpRefused(t *testing.T) {
	// mixUp signs in with provider "evil" (another tenant's, run by
	// whoever runs that tenant), whose authorization endpoint
	// sends the browser to honest's with the same request; it returns the
	// callback's answer.
	mixUp := func(t *testing.T, r *rig, honest *testOP) (*http.Response, string) {
		t.Helper()
		b := browser(t)
		res, body := get(t, b, r.url+"/auth/oidc/login?provider=evil")
		if res.StatusCode != http.StatusFound {
			t.Fatalf("login: %d %s", res.StatusCode, body)
		}
		to, _ := url.Parse(res.Header.Get("Location"))
		h, _ := url.Parse(honest.URL)
		to.Scheme, to.Host = h.Scheme, h.Host
		res, body = get(t, b, to.String())
		if res.StatusCode != http.StatusFound {
			t.Fatalf("honest authorize: %d %s", res.StatusCode, body)
		}
		return get(t, b, res.Header.Get("Location"))
	}
	rigOf := func(t *testing.T, honest, evil *testOP) *rig {
		return newRigOf(t, honest, func(c *config.Config) {
			c.SDK.OIDC.Providers = []config.OIDCProvider{{Name: "evil", Tenant: "globex", IssuerURL: evil.URL, ClientID: "app"}}
		})
	}
	// The sign-in is evil's; honest answers the callback with its own
	// code. Either honest's iss names it, or none comes where evil, the
	// sign-in's provider, says it sends one.
	for _, tc := range []struct {
		name        string
		honestSends bool
	}{{"iss of another provider", true}, {"iss missing where the provider sends it", false}} {
		t.Run(tc.name, func(t *testing.T) {
			honest, evil := newTestOP(t, "app"), newTestOP(t, "app")
			honest.issParam, evil.issParam = tc.honestSends, !tc.honestSends
			r := rigOf(t, honest, evil)
			res, body := mixUp(t, r, honest)
			wantRefused(t, "callback", res, body, reason.OIDCIssuerMismatch)
			evil.wantNoTokenCalls(t)
		})
	}
	t.Run("iss of its own provider", func(t *testing.T) {
		op := newTestOP(t, "app")
		op.issParam = true
		r := newRigOf(t, op, nil)
		b := browser(t)
		cb := r.toCallback(t, b, "/orders")
		if u, _ := url.Parse(cb); u.Query().Get("iss") != op.URL {
			t.Fatalf("the provider sent no iss: %s", cb)
		}
		if res, body := get(t, b, cb); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("callback: %d %s, want 303", res.StatusCode, body)
		}
	})
}
