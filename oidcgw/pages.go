package oidcgw

import (
	"html/template"
	"net/http"
	"net/url"

	"github.com/svc-dev/svc/engine/config"
)

// chooserPage offers the providers of a sign-in, and SAML when it is
// configured. It is self-contained (no script, no outside resource).
var chooserPage = template.Must(template.New("chooser").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="robots" content="noindex"><title>Sign in</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
a.p{display:block;margin:.5rem 0;padding:.75rem 1rem;border:1px solid #888;border-radius:.4rem;text-decoration:none;color:inherit}</style>
</head><body><h1>Sign in</h1>
{{range .Providers}}<a class="p" href="{{.URL}}">Sign in with {{.Name}}</a>
{{end}}{{if .SAML}}<a class="p" href="{{.SAML}}">Sign in with SAML single sign-on</a>
{{end}}{{if not .Any}}<p>No sign-in is configured for this organization.</p>{{end}}
</body></html>
`))

type choice struct{ Name, URL string }

// writeChooser answers the login page that offers choices (and SAML).
func (g *Gateway) writeChooser(w http.ResponseWriter, choices []*provider, returnTo string) {
	data := struct {
		Providers []choice
		SAML      string
		Any       bool
	}{}
	rt := url.QueryEscape(returnTo)
	for _, p := range choices {
		data.Providers = append(data.Providers, choice{Name: displayName(p.cfg.Name),
			URL: g.cfg.PathPrefix + PathLogin + "?provider=" + url.QueryEscape(p.cfg.Name) + "&return_to=" + rt})
	}
	if g.samlLogin != "" {
		data.SAML = g.samlLogin + "?return_to=" + rt
	}
	data.Any = len(data.Providers) > 0 || data.SAML != ""
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("X-Frame-Options", "DENY")
	_ = chooserPage.Execute(w, data)
}

// displayName is how the login page names a provider: [sdk.oidc]'s own,
// which has no name of its own in the configuration, is "OpenID
// Connect"; the others go by their name.
func displayName(name string) string {
	if name == config.DefaultOIDCProvider {
		return "OpenID Connect"
	}
	return name
}
