package loopback

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func TestCheckRedirectRule(t *testing.T) {
	tests := []struct {
		to   string
		hops int
		ok   bool
	}{
		{"https://idp.example.com/keys", 1, true},
		{"http://127.0.0.1:8080/keys", 1, true},
		{"http://localhost/keys", 4, true},
		{"http://idp.example.com/keys", 1, false},
		{"http://10.0.0.1/keys", 1, false},
		{"ftp://idp.example.com/keys", 1, false},
		{"https://idp.example.com/keys", MaxRedirects, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.to, tt.hops), func(t *testing.T) {
			via := make([]*http.Request, tt.hops)
			for i := range via {
				via[i] = httptest.NewRequest(http.MethodGet, "https://idp.example.com/start", nil)
			}
			err := CheckRedirect(httptest.NewRequest(http.MethodGet, tt.to, nil), via)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckRedirect(%s) = %v, want ok=%v", tt.to, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrRedirectRefused) {
				t.Errorf("error %v does not match ErrRedirectRefused", err)
			}
		})
	}
}

func TestSameOrigin(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"https://cp.example.com/a", "https://CP.example.com:443/b", true},
		{"http://127.0.0.1/a", "http://127.0.0.1:80/b", true},
		{"https://cp.example.com/a", "http://cp.example.com/a", false},
		{"https://cp.example.com/a", "https://cp.example.com:8443/a", false},
		{"http://127.0.0.1:7000/a", "http://127.0.0.1:7001/a", false},
		{"https://cp.example.com/a", "https://cdn.example.com/a", false},
		{"https://cp.example.com/a", "https://x.cp.example.com/a", false},
	}
	for _, tt := range tests {
		a, _ := url.Parse(tt.a)
		b, _ := url.Parse(tt.b)
		if got := SameOrigin(a, b); got != tt.want {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// capture records the Authorization header of every request it gets.
type capture struct {
	mu   sync.Mutex
	auth []string
}

func (c *capture) handler(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.auth = append(c.auth, r.Header.Get("Authorization")+"|"+r.Header.Get("Cookie"))
		c.mu.Unlock()
		_, _ = w.Write([]byte(body))
	}
}

func (c *capture) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.auth...)
}

// TestCheckRedirectCredentials: a real client following real redirects
// sends the credentials to the first origin and to a later hop back on
// it, and never to another origin, even one on the same host, where
// net/http alone would send them.
func TestCheckRedirectCredentials(t *testing.T) {
	var same, other capture
	// Another port on the same host: net/http keeps Authorization, since
	// only the host is compared.
	otherSrv := httptest.NewServer(other.handler("other"))
	t.Cleanup(otherSrv.Close)
	var sameSrv *httptest.Server
	sameSrv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-other":
			http.Redirect(w, r, otherSrv.URL+"/bundle", http.StatusFound)
		case "/to-self":
			http.Redirect(w, r, sameSrv.URL+"/final", http.StatusFound)
		default:
			same.handler("same")(w, r)
		}
	}))
	t.Cleanup(sameSrv.Close)

	client := &http.Client{CheckRedirect: CheckRedirect}
	get := func(path string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, sameSrv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		req.Header.Set("Cookie", "sid=s3cret")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get("/to-self")
	if got := same.got(); len(got) != 1 || got[0] != "Bearer s3cret|sid=s3cret" {
		t.Errorf("a redirect to the same origin: the credentials arrived as %q, want them kept", got)
	}
	get("/to-other")
	if got := other.got(); len(got) != 1 || strings.Contains(got[0], "s3cret") {
		t.Errorf("a redirect to another port of the same host: the other origin got %q, want no credentials", got)
	}
}

// TestCheckRedirectDowngrade: an https server redirecting to plain http
// off loopback is refused before any request is made there.
func TestCheckRedirectDowngrade(t *testing.T) {
	srv := httptest.NewTLSServer(http.RedirectHandler("http://cp.example.invalid/bundle.tar.gz", http.StatusFound))
	t.Cleanup(srv.Close)
	client := srv.Client()
	client.CheckRedirect = CheckRedirect
	resp, err := client.Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("the redirect to plain http was followed")
	}
	if !errors.Is(err, ErrRedirectRefused) || !strings.Contains(err.Error(), "redirect to http://cp.example.invalid refused") {
		t.Errorf("error %v, want the redirect refused", err)
	}
}
