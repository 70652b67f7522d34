package harness

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
)

// TestBrowser drives the real Chromium through a redirect, an auto-posted
// form and a cookie, and reads what it stored and was shown.
func TestBrowser(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/start":
			http.Redirect(w, r, "/form", http.StatusFound)
		case "/form":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><body onload="document.forms[0].submit()"><form method="post" action="/done"><input type="hidden" name="v" value="x&y"></form></body></html>`)
		case "/done":
			http.SetCookie(w, &http.Cookie{Name: "s", Value: r.PostFormValue("v"), Path: "/", MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteLaxMode})
			http.Redirect(w, r, "/landed", http.StatusSeeOther)
		case "/landed":
			c, err := r.Cookie("s")
			if err != nil {
				http.Error(w, "no cookie", http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, `<html><head><title>landed</title></head><body><p id="v">cookie %s</p></body></html>`, c.Value)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	b := StartBrowser(t)
	b.Navigate(t, srv.URL+"/start")
	p := b.WaitPage(t, 20*time.Second, func(p Page) bool { return strings.HasSuffix(p.URL, "/landed") })
	if p.Title != "landed" || p.Text != "cookie x&y" {
		t.Fatalf("page %s", p)
	}
	c := b.Cookie(t, srv.URL, "s")
	if c == nil || c.Value != "x&y" || !c.HTTPOnly || c.Secure || c.SameSite != network.CookieSameSiteLax || c.Path != "/" {
		t.Fatalf("cookie %+v", c)
	}
	if left := time.Until(time.Unix(int64(c.Expires), 0)); left < 50*time.Second || left > 61*time.Second {
		t.Errorf("cookie expires in %s, want about 60s", left)
	}
	var statuses []int64
	for _, d := range b.Documents() {
		statuses = append(statuses, d.Status)
	}
	if len(statuses) < 2 || statuses[len(statuses)-1] != 200 {
		t.Errorf("document answers %v", b.Documents())
	}

	b.SetCookie(t, srv.URL, network.SetCookieParams{Name: "s", Value: "set", Path: "/"})
	b.Navigate(t, srv.URL+"/landed")
	if p := b.WaitPage(t, 10*time.Second, func(Page) bool { return true }); p.Text != "cookie set" {
		t.Fatalf("after SetCookie: %s", p)
	}
}
