// Package signinmux routes the endpoints of the browser sign-in gateways
// (SAML and OpenID Connect) below their path prefix, and hands every
// other request to the gateway's own refusal.
package signinmux

import "net/http"

// Route is one endpoint of a gateway.
type Route struct {
	// Method is the method it takes; GET takes HEAD too.
	Method string
	// Path is its path below the prefix.
	Path  string
	Serve http.HandlerFunc
}

// Handler serves routes below prefix. A request that none of them matches
// goes to miss, with the methods its path takes as an Allow header lists
// them ("GET, HEAD, POST", in the order of routes), or "" when no route
// has that path.
func Handler(prefix string, miss func(w http.ResponseWriter, r *http.Request, allow string), routes ...Route) http.Handler {
	mux := http.NewServeMux()
	allow := make(map[string]string, len(routes))
	for _, rt := range routes {
		path := prefix + rt.Path
		mux.HandleFunc(rt.Method+" "+path, rt.Serve)
		methods := rt.Method
		if methods == http.MethodGet {
			methods += ", " + http.MethodHead
		}
		if prev := allow[path]; prev != "" {
			methods = prev + ", " + methods
		}
		allow[path] = methods
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		miss(w, r, allow[r.URL.Path])
	})
}
