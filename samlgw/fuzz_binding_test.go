package samlgw

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequestCookie sends login an arbitrary request cookie, as a browser
// may hold anything under that name: login still answers 302, and the
// cookie it sets lists the new request id first and at most
// maxBoundRequests ids, each one a valid request of this gateway.
func FuzzRequestCookie(f *testing.F) {
	g, _ := fuzzGateway(f, false)
	h := g.Handler()
	valid, err := g.v.requests.mint(f.Context())
	if err != nil {
		f.Fatal(err)
	}
	f.Add("")
	f.Add(valid)
	f.Add(strings.Repeat(valid+".", 9) + "x")
	f.Add("..id-.%zz")
	f.Fuzz(func(t *testing.T, value string) {
		req := httptest.NewRequest(http.MethodGet, "/auth/saml/login", nil)
		req.Header.Set("Cookie", g.requestCookieName()+"="+value)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusFound {
			t.Fatalf("login with cookie %q: %d %s", value, rec.Code, rec.Body)
		}
		var set *http.Cookie
		for _, c := range rec.Result().Cookies() {
			if c.Name == g.requestCookieName() {
				set = c
			}
		}
		if set == nil {
			t.Fatalf("login with cookie %q set no request cookie", value)
		}
		ids := strings.Split(set.Value, ".")
		if len(ids) > maxBoundRequests {
			t.Fatalf("cookie %q lists %d ids", set.Value, len(ids))
		}
		if strings.Contains(value, ids[0]) {
			t.Fatalf("cookie %q: the first id is not the new request", set.Value)
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("cookie %q lists %q twice", set.Value, id)
			}
			seen[id] = true
			if _, ok, err := g.v.requests.verify(t.Context(), id, 0); !ok || err != nil {
				t.Fatalf("cookie %q lists %q, not a valid request id", set.Value, id)
			}
		}
		if !strings.Contains(rec.Header().Get("Location"), "SAMLRequest=") {
			t.Fatalf("no AuthnRequest in %q", rec.Header().Get("Location"))
		}
	})
}
