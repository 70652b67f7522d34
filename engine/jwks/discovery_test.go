package jwks_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// oidcProvider serves a discovery document and key sets over real TLS;
// the test changes what it serves.
type oidcProvider struct {
	srv    *httptest.Server
	mu     sync.Mutex
	doc    string // the discovery document; "" answers 503
	sets   map[string][]byte
	docHit int
}

func newOIDCProvider(t testing.TB) *oidcProvider {
	t.Helper()
	p := &oidcProvider{sets: map[string][]byte{}}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if r.URL.Path == "/.well-known/openid-configuration" {
			p.docHit++
			if p.doc == "" {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(p.doc))
			return
		}
		set, ok := p.sets[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(set)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// publish serves a document naming issuer and the set at path.
func (p *oidcProvider) publish(issuer, path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.doc = `{"issuer":"` + issuer + `","jwks_uri":"` + p.srv.URL + path + `","token_endpoint":"` + p.srv.URL + `/token"}`
}

func (p *oidcProvider) down() {
	p.mu.Lock()
	p.doc = ""
	p.mu.Unlock()
}

func (p *oidcProvider) setKeys(path string, body []byte) {
	p.mu.Lock()
	p.sets[path] = body
	p.mu.Unlock()
}

func discoveryCache(t *testing.T, p *oidcProvider) (*jwks.Cache, *clock) {
	t.Helper()
	clk := newClock()
	c, err := jwks.New(jwks.Options{IssuerURL: p.srv.URL, Client: p.srv.Client(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

func TestDiscoveryIssuerMismatch(t *testing.T) {
	k := keys()
	p := newOIDCProvider(t)
	p.setKeys("/keys", jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey)))
	for name, issuer := range map[string]string{
		"other host":        "https://evil.example.com",
		"trailing slash":    p.srv.URL + "/",
		"different case":    strings.ToUpper(p.srv.URL),
		"path appended":     p.srv.URL + "/tenant",
		"empty issuer name": "",
	} {
		t.Run(name, func(t *testing.T) {
			p.publish(issuer, "/keys")
			c, _ := discoveryCache(t, p)
			_, err := c.Key(context.Background(), "k1")
			if reason.Of(err, "") != reason.JWKSUnavailable || !errors.Is(err, jwks.ErrIssuerMismatch) {
				t.Fatalf("Key = %v, want jwks-unavailable for an issuer mismatch", err)
			}
			st := c.Status()
			if !strings.Contains(st.LastError, `"`+issuer+`"`) || !strings.Contains(st.LastError, `"`+p.srv.URL+`"`) {
				t.Errorf("LastError %q does not name both issuers", st.LastError)
			}
			if st.Keys != 0 || st.URL != "" || st.Issuer != p.srv.URL {
				t.Errorf("status = %+v, want no keys nor jwks_uri from a refused document", st)
			}
		})
	}
}

func TestDiscoveryUnreachableThenBack(t *testing.T) {
	k := keys()
	p := newOIDCProvider(t)
	p.setKeys("/keys", jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey)))
	p.down()
	c, clk := discoveryCache(t, p)
	ctx := context.Background()
	if _, err := c.Key(ctx, "k1"); reason.Of(err, "") != reason.JWKSUnavailable || !strings.Contains(err.Error(), "status 503") {
		t.Fatalf("Key with the document down = %v, want jwks-unavailable naming the status", err)
	}

	p.publish(p.srv.URL, "/keys")
	clk.Advance(time.Minute)
	if _, err := c.Key(ctx, "k1"); err != nil {
		t.Fatalf("Key once the document is back: %v", err)
	}
	if st := c.Status(); st.URL != p.srv.URL+"/keys" || st.Keys != 1 || st.Partitioned {
		t.Fatalf("status = %+v, want the jwks_uri's key", st)
	}

	// Down again: the keys loaded keep serving, and the status says so.
	p.down()
	clk.Advance(time.Minute)
	if _, err := c.Key(ctx, "k2"); reason.Of(err, "") != reason.UnknownKID {
		t.Fatalf("unknown kid while the document is down: %v, want unknown-kid", err)
	}
	if _, err := c.Key(ctx, "k1"); err != nil {
		t.Fatalf("cached key while the document is down: %v", err)
	}
	if st := c.Status(); !st.Partitioned || st.Keys != 1 || !strings.Contains(st.LastError, "discovery fetch") {
		t.Fatalf("status while down = %+v, want partitioned with the key", st)
	}

	p.publish(p.srv.URL, "/keys")
	clk.Advance(time.Minute)
	if _, err := c.Key(ctx, "k3"); reason.Of(err, "") != reason.UnknownKID {
		t.Fatalf("Key = %v, want unknown-kid after a refetch", err)
	}
	if st := c.Status(); st.Partitioned || st.LastError != "" {
		t.Fatalf("status after recovery = %+v", st)
	}
}

func TestDiscoveryJWKSURIChange(t *testing.T) {
	k := keys()
	p := newOIDCProvider(t)
	p.setKeys("/a", jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey)))
	p.setKeys("/b", jwksJSON(t, rsaJWK("k2", &k.rsa2.PublicKey)))
	p.publish(p.srv.URL, "/a")
	c, clk := discoveryCache(t, p)
	changed := make(chan struct{}, 1)
	c2, err := jwks.New(jwks.Options{IssuerURL: p.srv.URL, Client: p.srv.Client(), Now: clk.Now,
		OnChange: func() { changed <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []*jwks.Cache{c, c2} {
		if _, err := c.Key(ctx, "k1"); err != nil {
			t.Fatal(err)
		}
	}
	p.publish(p.srv.URL, "/b")
	clk.Advance(time.Minute)
	for _, c := range []*jwks.Cache{c, c2} {
		if _, err := c.Key(ctx, "k2"); err != nil {
			t.Fatalf("key of the new jwks_uri: %v", err)
		}
		if _, err := c.Key(ctx, "k1"); reason.Of(err, "") != reason.UnknownKID {
			t.Fatalf("key of the old jwks_uri: %v, want unknown-kid", err)
		}
		if st := c.Status(); st.URL != p.srv.URL+"/b" {
			t.Errorf("URL = %q, want the new jwks_uri", st.URL)
		}
	}
	select {
	case <-changed:
	default:
		t.Error("OnChange was not called when the set of the new jwks_uri replaced the old")
	}
}

func TestDiscoveryURL(t *testing.T) {
	for issuer, want := range map[string]string{
		"https://idp.example.com":         "https://idp.example.com/.well-known/openid-configuration",
		"https://idp.example.com/":        "https://idp.example.com/.well-known/openid-configuration",
		"https://idp.example.com/realm/a": "https://idp.example.com/realm/a/.well-known/openid-configuration",
	} {
		if got := jwks.DiscoveryURL(issuer); got != want {
			t.Errorf("DiscoveryURL(%q) = %q, want %q", issuer, got, want)
		}
	}
}

func TestParseDiscovery(t *testing.T) {
	const iss = "https://idp.example.com"
	tests := []struct {
		name, doc, want, err string
	}{
		{"ok", `{"issuer":"https://idp.example.com","jwks_uri":"https://idp.example.com/keys"}`, "https://idp.example.com/keys", ""},
		{"loopback http", `{"issuer":"https://idp.example.com","jwks_uri":"http://127.0.0.1:8080/keys"}`, "http://127.0.0.1:8080/keys", ""},
		{"mismatch", `{"issuer":"https://idp.example.com/","jwks_uri":"https://idp.example.com/keys"}`, "", "discovery issuer mismatch"},
		{"no issuer", `{"jwks_uri":"https://idp.example.com/keys"}`, "", "no issuer"},
		{"no jwks_uri", `{"issuer":"https://idp.example.com"}`, "", "no jwks_uri"},
		{"public http", `{"issuer":"https://idp.example.com","jwks_uri":"http://idp.example.com/keys"}`, "", "must be an absolute https URL"},
		{"relative", `{"issuer":"https://idp.example.com","jwks_uri":"/keys"}`, "", "must be an absolute https URL"},
		{"credentials", `{"issuer":"https://idp.example.com","jwks_uri":"https://u:p@idp.example.com/keys"}`, "", "without credentials"},
		{"not json", `<html>`, "", "discovery document"},
		{"issuer not a string", `{"issuer":1,"jwks_uri":"https://idp.example.com/keys"}`, "", "discovery document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jwks.ParseDiscovery([]byte(tt.doc), iss)
			if tt.err == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseDiscovery = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) || got != "" {
				t.Fatalf("ParseDiscovery = %q, %v; want an error with %q", got, err, tt.err)
			}
			if strings.Contains(err.Error(), ":p@") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// FuzzParseDiscovery feeds arbitrary documents to ParseDiscovery, seeded
// with testdata/discovery: it never panics, and a jwks_uri it returns is
// one a cache may fetch, from a document whose issuer is the one asked.
func FuzzParseDiscovery(f *testing.F) {
	for _, seed := range testkit.ReadGlob(f, "testdata/discovery/*.json") {
		f.Add(seed.Data)
	}
	const iss = "https://idp.example.com"
	f.Fuzz(func(t *testing.T, doc []byte) {
		uri, err := jwks.ParseDiscovery(doc, iss)
		if err != nil {
			if uri != "" {
				t.Fatalf("jwks_uri %q with error %v", uri, err)
			}
			return
		}
		if _, err := jwks.New(jwks.Options{URL: uri}); err != nil {
			t.Fatalf("accepted jwks_uri %q that a cache refuses: %v", uri, err)
		}
	})
}
