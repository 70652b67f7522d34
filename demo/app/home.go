package app

import (
	"html/template"
	"net/http"
	"strings"

	"github.com/svc-dev/svc/authz"
)

// HomePath is where every demo service serves the signed-in person's home
// page; the demo's front proxy routes it to the orders service, checked
// like any other route (action home:read), and sign-in (OpenID Connect or
// SAML) sends browsers there after sign-in and sign-out
// (sdk.session.default_return_to).
const HomePath = "/home"

// LogoutPath is the SAML gateway's sign-out endpoint behind the demo's
// front proxy. It ends the sidecar's session whichever provider opened it
// (the session cookie is one), and goes to default_return_to; the demo's
// OpenID provider keeps no sign-in session of its own to end.
const LogoutPath = "/auth/saml/logout"

// homeData is what the home page shows.
type homeData struct {
	Subject, Tenant, DecisionID string
	Roles                       []string
	Links                       []homeLink
	Logout                      string
}

type homeLink struct{ Label, Href string }

// homePage is self-contained: no script, no external asset. html/template
// escapes every value taken from the request.
var homePage = template.Must(template.New("home").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>svc demo: home</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 40em; margin: 3em auto; padding: 0 1em; color: #222; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .4em 1.2em; }
dt { font-weight: 600; }
code { background: #f2f2f2; padding: 0 .3em; }
nav a { margin-right: 1.2em; }
</style>
</head>
<body>
<h1>Signed in</h1>
<dl>
<dt>Subject</dt><dd id="subject">{{.Subject}}</dd>
<dt>Tenant</dt><dd id="tenant">{{if .Tenant}}{{.Tenant}}{{else}}(none){{end}}</dd>
<dt>Roles</dt><dd id="roles">{{range $i, $r := .Roles}}{{if $i}}, {{end}}<code>{{$r}}</code>{{else}}(none){{end}}</dd>
<dt>Decision</dt><dd id="decision">{{.DecisionID}}</dd>
</dl>
<nav>
{{range .Links}}<a href="{{.Href}}">{{.Label}}</a>
{{end}}<a id="logout" href="{{.Logout}}">Sign out</a>
</nav>
</body>
</html>
`))

// serveHome answers GET /home with the caller the sidecar let through.
func (s *Server) serveHome(w http.ResponseWriter, r *http.Request) {
	u, _ := authz.UserFrom(r.Context())
	d := homeData{
		Subject: u.Subject, Tenant: u.TenantID, DecisionID: u.DecisionID, Roles: userRoles(u),
		Links: []homeLink{
			{"Orders", "/orders"}, {"Order 7", "/orders/7"},
			{"Invoices", "/invoices"}, {"Invoice 3", "/invoices/3"},
		},
		Logout: LogoutPath,
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// The page names a person: neither a shared cache nor the browser's
	// back button after sign-out may show it to someone else.
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	_ = homePage.Execute(w, d)
}

// userRoles are the caller's roles: the x-svc-roles header's list in proxy
// mode, the token's roles claim in SDK mode.
func userRoles(u authz.User) []string {
	var out []string
	switch v := u.Claims["roles"].(type) {
	case []string:
		out = v
	case []any:
		for _, r := range v {
			if s, ok := r.(string); ok {
				out = append(out, s)
			}
		}
	case string:
		out = strings.Split(v, ",")
	}
	roles := out[:0:0]
	for _, r := range out {
		if r = strings.TrimSpace(r); r != "" {
			roles = append(roles, r)
		}
	}
	return roles
}
