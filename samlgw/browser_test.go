package samlgw_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw"
)

const acceptBrowser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

type reply struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) send(t *testing.T, method, path, accept, form string) reply {
	t.Helper()
	var body io.Reader
	if form != "" {
		body = strings.NewReader(form)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// Every refusal of the gateway is the HTML page for a browser, with a
// sign-in link where signing in again can help, and the JSON refusal,
// as before, for everyone else.
func TestRefusalsNegotiate(t *testing.T) {
	// Development mode (no signature check) lets unsigned responses reach
	// the expiry and request checks.
	f := newFixture(t, devMode)
	expired := valid()
	expired.NotOnOrAfter = time.Now().Add(-time.Hour)
	expiredForm := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(testIdP.XML(expired, false))},
		"RelayState": {"/orders/7?x=1"}}.Encode()
	unknown := valid()
	unknown.InResponseTo = "id-never-issued"
	unknownForm := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(testIdP.XML(unknown, false))}}.Encode()
	tests := []struct {
		name, method, path, form string
		status                   int
		code                     samlgw.Code
		link                     string // sign-in link of the page; "" none
	}{
		{"GET /acs", "GET", "/auth/saml/acs", "", 405, reason.SAMLMethodNotAllowed, "/auth/saml/login"},
		{"unknown path", "GET", "/auth/saml/nope", "", 404, reason.SAMLNotFound, "/auth/saml/login"},
		{"bad return_to", "GET", "/auth/saml/login?return_to=https://evil.example/", "", 400, reason.SAMLBadReturnTo, "/auth/saml/login"},
		{"ACS not a form", "POST", "/auth/saml/acs", "", 400, reason.SAMLMalformed, ""},
		{"ACS expired response", "POST", "/auth/saml/acs", expiredForm, 401, reason.SAMLExpired, ""},
		{"ACS unknown request", "POST", "/auth/saml/acs", unknownForm, 401, reason.SAMLRequestUnknown, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := f.send(t, tt.method, tt.path, "application/json", tt.form)
			var rf struct{ Error, Message string }
			if err := json.Unmarshal([]byte(api.body), &rf); err != nil || api.status != tt.status ||
				api.header.Get("Content-Type") != "application/json" || tt.code != "" && rf.Error != string(tt.code) {
				t.Fatalf("API client: %d %s %s", api.status, api.header.Get("Content-Type"), api.body)
			}
			// No Accept and curl's */* get the same JSON.
			for _, accept := range []string{"", "*/*"} {
				if r := f.send(t, tt.method, tt.path, accept, tt.form); r.status != api.status || r.body != api.body {
					t.Errorf("Accept %q: %d %s, want %d %s", accept, r.status, r.body, api.status, api.body)
				}
			}
			page := f.send(t, tt.method, tt.path, acceptBrowser, tt.form)
			if page.status != tt.status || page.header.Get("Content-Type") != "text/html; charset=utf-8" ||
				page.header.Get("Content-Security-Policy") == "" || !strings.HasPrefix(page.body, "<!doctype html>") ||
				!strings.Contains(page.body, "<code>"+rf.Error+"</code>") {
				t.Fatalf("browser: %d %v %s", page.status, page.header, page.body)
			}
			if tt.method == "GET" && tt.path == "/auth/saml/acs" && page.header.Get("Allow") != "POST" {
				t.Errorf("Allow %q", page.header.Get("Allow"))
			}
			link := tt.link
			if rf.Error == string(reason.SAMLExpired) || rf.Error == string(reason.SAMLRequestUnknown) {
				link = "/auth/saml/login"
				if strings.Contains(tt.form, "RelayState") {
					link += "?return_to=%2Forders%2F7%3Fx%3D1"
				}
			}
			switch {
			case link != "" && !strings.Contains(page.body, `href="`+link+`"`):
				t.Errorf("page lacks the sign-in link %s: %s", link, page.body)
			case link == "" && strings.Contains(page.body, "href="):
				t.Errorf("page has a link: %s", page.body)
			}
		})
	}
}

// Login, the ACS and logout land on default_return_to when no return_to
// (RelayState) names a page.
func TestDefaultReturnTo(t *testing.T) {
	f := newFixture(t, withSAML(func(s *config.SAML) {
		s.DefaultReturnTo = "/home"
		s.AllowIDPInitiated = true
	}))
	_, loc, status := f.login(t, "")
	if status != http.StatusFound || loc.Query().Get("RelayState") != "/home" {
		t.Errorf("login without return_to: %d RelayState %q, want /home", status, loc.Query().Get("RelayState"))
	}
	_, loc, _ = f.login(t, "/orders/7")
	if loc.Query().Get("RelayState") != "/orders/7" {
		t.Errorf("login with return_to: RelayState %q", loc.Query().Get("RelayState"))
	}
	doc := signed(t, valid())
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}}.Encode()
	if a := f.postBody(t, form, false); a.status != http.StatusSeeOther || a.header.Get("Location") != "/home" {
		t.Errorf("ACS without RelayState: %d Location %q, want 303 /home", a.status, a.header.Get("Location"))
	}
	for _, q := range []string{"", "?return_to=//evil.example"} {
		r := f.send(t, "GET", "/auth/saml/logout"+q, acceptBrowser, "")
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/home" {
			t.Errorf("logout%s: %d Location %q, want 303 /home", q, r.status, r.header.Get("Location"))
		}
	}
	if r := f.send(t, "GET", "/auth/saml/logout", "application/json", ""); r.status != http.StatusNoContent {
		t.Errorf("JSON logout: %d", r.status)
	}
}

// A browser shows the SP metadata inline; API clients keep the SAML type.
func TestMetadataInlineForBrowsers(t *testing.T) {
	f := newFixture(t)
	api := f.send(t, "GET", "/auth/saml/metadata", "", "")
	if api.status != 200 || api.header.Get("Content-Type") != "application/samlmetadata+xml" || api.header.Get("Content-Disposition") != "" {
		t.Errorf("API client: %d %v", api.status, api.header)
	}
	b := f.send(t, "GET", "/auth/saml/metadata", acceptBrowser, "")
	if b.status != 200 || b.header.Get("Content-Type") != "application/xml; charset=utf-8" ||
		b.header.Get("Content-Disposition") != "inline" || !strings.Contains(b.body, "EntityDescriptor") {
		t.Errorf("browser: %d %v", b.status, b.header)
	}
}

// Without token_signing_key_file and without SVC_ENV=development, the status
// says the sessions are ephemeral, and Run warns.
func TestTokenKeyEphemeral(t *testing.T) {
	var logs bytes.Buffer
	f := newFixture(t, func(_ *config.Config, d *samlgw.Deps) {
		d.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if st := f.gw.Status(); !st.TokenKeyGenerated || !st.TokenKeyEphemeral {
		t.Errorf("status %+v, want the generated key ephemeral", st)
	}
	_ = f.gw.Run(context.Background()) // a metadata file: returns at once
	if !strings.Contains(logs.String(), "token_signing_key_file is not set") {
		t.Errorf("no warning at start: %s", logs.String())
	}
	if st := newFixture(t, devMode).gw.Status(); !st.TokenKeyGenerated || st.TokenKeyEphemeral {
		t.Errorf("development mode: %+v, want generated, not flagged", st)
	}
}

// Unknown paths and methods under the prefix are JSON refusals too.
func TestUnknownRouteRefusals(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		method, path string
		status       int
		code         samlgw.Code
		allow        string
	}{
		{http.MethodGet, "/auth/saml/acs", http.StatusMethodNotAllowed, reason.SAMLMethodNotAllowed, "POST"},
		{http.MethodDelete, "/auth/saml/logout", http.StatusMethodNotAllowed, reason.SAMLMethodNotAllowed, "GET, HEAD, POST"},
		{http.MethodPost, "/auth/saml/metadata", http.StatusMethodNotAllowed, reason.SAMLMethodNotAllowed, "GET, HEAD"},
		{http.MethodGet, "/auth/saml/nope", http.StatusNotFound, reason.SAMLNotFound, ""},
		{http.MethodGet, "/", http.StatusNotFound, reason.SAMLNotFound, ""},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, f.srv.URL+tt.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]string
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || err != nil || body["error"] != string(tt.code) || body["message"] == "" || resp.Header.Get("Allow") != tt.allow {
			t.Errorf("%s %s: %d %v Allow %q, want %d %q Allow %q", tt.method, tt.path, resp.StatusCode, body, resp.Header.Get("Allow"), tt.status, tt.code, tt.allow)
		}
	}
}
