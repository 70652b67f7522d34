package harness

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Echo is what the echo upstream saw of a request; it answers with it as
// JSON.
type Echo struct {
	Method  string              `json:"method"`
	URI     string              `json:"uri"`
	Headers map[string][]string `json:"headers"`
}

// Upstream is an application behind a proxy: it answers every request 200
// with an Echo of it, and marks the answer with the header
// X-Upstream: echo so a test can tell it from a proxy's own answer.
type Upstream struct {
	// URL is "http://127.0.0.1:port"; Addr is "127.0.0.1:port".
	URL, Addr string

	hits atomic.Int64
}

// StartUpstream starts the echo upstream until the test ends.
func StartUpstream(t testing.TB) *Upstream {
	t.Helper()
	u := &Upstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		e := Echo{Method: r.Method, URI: r.RequestURI, Headers: map[string][]string(r.Header.Clone())}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", "echo")
		_ = json.NewEncoder(w).Encode(e)
	}))
	t.Cleanup(srv.Close)
	u.URL = srv.URL
	u.Addr = srv.Listener.Addr().String()
	return u
}

// Hits returns the number of requests that reached the upstream.
func (u *Upstream) Hits() int64 { return u.hits.Load() }

// ParseEcho decodes an answer of the echo upstream.
func ParseEcho(t testing.TB, body []byte) Echo {
	t.Helper()
	var e Echo
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("upstream answer is not an echo: %v: %s", err, clip(string(body), 300))
	}
	return e
}

// Header returns the values of a header the upstream received, by
// canonical name.
func (e Echo) Header(name string) []string {
	return e.Headers[http.CanonicalHeaderKey(name)]
}
