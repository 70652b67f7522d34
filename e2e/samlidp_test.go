package e2e

import (
	"encoding/json"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// loginRedirect asks the gateway at base for a login to returnTo and
// returns the IdP address it redirects to, waiting while the gateway has
// no IdP metadata yet (503).
func loginRedirect(t *testing.T, client *http.Client, base, returnTo string) string {
	t.Helper()
	resp := samlLogin(t, client, base+"/auth/saml/login?return_to="+url.QueryEscape(returnTo))
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("login: %d, want 302 to the IdP", resp.StatusCode)
	}
	return resp.Header.Get("Location")
}

// The demo IdP's sign-on asks a browser which demo user signs in, and
// answers every other client as before: &user= signs that user in
// directly, JSON clients get JSON, curl's */* the default user.
func TestSAMLIdPSignInPage(t *testing.T) {
	s := startSAMLIdP(t)
	harness.StartSidecar(t, harness.SidecarOptions{Env: s.env(s.samlAddr, false, nil)})
	// A cookie jar, as a browser has: the gateway may bind the login to
	// the client that started it.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: noRedirect.CheckRedirect, Jar: jar}
	loc := loginRedirect(t, client, "http://"+s.samlAddr, "/orders/7?x=1")
	sso, err := url.Parse(loc)
	if err != nil || !strings.HasPrefix(loc, s.idp.BaseURL+"/sso?") {
		t.Fatalf("login redirect %q", loc)
	}

	get := func(u, accept string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		status, h, body := harness.Do(t, req)
		return status, h.Get("Content-Type"), string(body)
	}
	const chrome = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"
	buttons := regexp.MustCompile(`<button type="submit" name="user" value="([^"]+)">`)
	hidden := regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)
	autoPost := regexp.MustCompile(`<form method="post" action="([^"]+)">\s*<input type="hidden" name="SAMLResponse" value="([^"]+)">`)

	for _, accept := range []string{chrome, "text/html", "application/json;q=0.5, text/html"} {
		t.Run("sign-in page for "+accept, func(t *testing.T) {
			status, ctype, body := get(loc, accept)
			if status != 200 || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(body, "Sign in as") {
				t.Fatalf("%d %s:\n%s", status, ctype, body)
			}
			var users []string
			for _, m := range buttons.FindAllStringSubmatch(body, -1) {
				users = append(users, m[1])
			}
			if strings.Join(users, ",") != "alice,bob,carol,nora" {
				t.Errorf("users offered %v, want the IdP's four demo users", users)
			}
			// The page carries the request on, unchanged.
			carried := url.Values{}
			for _, m := range hidden.FindAllStringSubmatch(body, -1) {
				carried.Add(html.UnescapeString(m[1]), html.UnescapeString(m[2]))
			}
			if carried.Encode() != sso.Query().Encode() {
				t.Errorf("page carries %v, want the sign-on query %v", carried, sso.Query())
			}
			if !strings.Contains(body, `<form method="get" action="/sso">`) || strings.Contains(body, "<script") {
				t.Errorf("not a plain GET form back to /sso:\n%s", body)
			}
		})
	}

	t.Run("picking a user answers the auto-posted response", func(t *testing.T) {
		status, _, body := get(loc+"&user=bob", chrome)
		m := autoPost.FindStringSubmatch(body)
		if status != 200 || m == nil || m[1] != "http://"+s.samlAddr+"/auth/saml/acs" {
			t.Fatalf("%d:\n%s", status, body)
		}
		if !strings.Contains(body, `name="RelayState" value="/orders/7?x=1"`) {
			t.Errorf("RelayState not carried:\n%s", body)
		}
		form := url.Values{"SAMLResponse": {html.UnescapeString(m[2])}, "RelayState": {"/orders/7"}}
		req, _ := http.NewRequest(http.MethodPost, m[1], strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var tok tokenAnswerJSON
		if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || resp.StatusCode != 200 || tok.Token == "" {
			t.Fatalf("ACS for bob's response: %d %v", resp.StatusCode, err)
		}
	})

	for _, tc := range []struct{ name, accept string }{
		{"curl's */* gets the default user", "*/*"},
		{"no Accept gets the default user", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := get(loc, tc.accept)
			if status != 200 || autoPost.FindStringSubmatch(body) == nil || strings.Contains(body, "Sign in as") {
				t.Fatalf("%d:\n%s", status, body)
			}
		})
	}
	for _, accept := range []string{"application/json", "application/json, text/html;q=0.9"} {
		t.Run("JSON for "+accept, func(t *testing.T) {
			status, ctype, body := get(loc, accept)
			var a idpAnswer
			if status != 200 || ctype != "application/json" || json.Unmarshal([]byte(body), &a) != nil || a.SAMLResponse == "" || a.RelayState != "/orders/7?x=1" {
				t.Fatalf("%d %s: %s", status, ctype, body)
			}
		})
	}
	t.Run("a broken request gets no page", func(t *testing.T) {
		status, _, body := get(s.idp.BaseURL+"/sso?SAMLRequest=bm90IGEgcmVxdWVzdA", chrome)
		if status != 400 || strings.Contains(body, "Sign in as") {
			t.Fatalf("%d: %s", status, body)
		}
	})
	t.Run("an unknown user", func(t *testing.T) {
		if status, _, body := get(loc+"&user=mallory", chrome); status != 404 || !strings.Contains(body, "no demo user mallory") {
			t.Fatalf("%d: %s", status, body)
		}
	})
}

// tokenAnswerJSON is the ACS's answer to a JSON client.
type tokenAnswerJSON struct {
	Token string `json:"token"`
}
