package signinmux_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/svc-dev/svc/internal/signinmux"
)

// TestHandler: a route's method and path reach it (GET takes HEAD too);
// any other request reaches miss with the methods its path takes, in
// route order, or "" for a path no route has.
func TestHandler(t *testing.T) {
	served := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("X-Served", name) }
	}
	h := signinmux.Handler("/sso",
		func(w http.ResponseWriter, _ *http.Request, allow string) {
			w.Header().Set("X-Miss", "1")
			w.Header().Set("X-Allow", allow)
		},
		signinmux.Route{Method: http.MethodGet, Path: "/login", Serve: served("login")},
		signinmux.Route{Method: http.MethodGet, Path: "/logout", Serve: served("logout-get")},
		signinmux.Route{Method: http.MethodPost, Path: "/logout", Serve: served("logout-post")},
		signinmux.Route{Method: http.MethodPost, Path: "/acs", Serve: served("acs")},
	)
	for _, c := range []struct{ method, path, served, allow string }{
		{"GET", "/sso/login", "login", ""},
		{"HEAD", "/sso/login", "login", ""},
		{"POST", "/sso/logout", "logout-post", ""},
		{"GET", "/sso/logout", "logout-get", ""},
		{"POST", "/sso/login", "", "GET, HEAD"},
		{"DELETE", "/sso/logout", "", "GET, HEAD, POST"},
		{"GET", "/sso/acs", "", "POST"},
		{"GET", "/sso/nowhere", "", ""},
		{"GET", "/login", "", ""},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
			got, miss := rec.Header().Get("X-Served"), rec.Header().Get("X-Miss") == "1"
			if got != c.served || miss != (c.served == "") {
				t.Fatalf("served %q (miss %v), want %q", got, miss, c.served)
			}
			if a := rec.Header().Get("X-Allow"); miss && a != c.allow {
				t.Errorf("allow %q, want %q", a, c.allow)
			}
		})
	}
}
