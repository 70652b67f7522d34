// Package jwkstest serves a JWKS for tests.
package jwkstest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Server is a JWKS endpoint over real TLS that counts its requests and
// can rotate its keys or fail: every path answers with the body, status
// and Cache-Control last set.
type Server struct {
	// Srv is the TLS server; Srv.Client() trusts it.
	Srv *httptest.Server

	mu           sync.Mutex
	body         []byte
	status       int
	cacheControl string
	times        []time.Time // of every request served
}

// New starts a server that answers 200 with body; it is closed when t
// ends.
func New(t testing.TB, body []byte) *Server {
	t.Helper()
	s := &Server{body: body, status: http.StatusOK}
	s.Srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body, status, cc := s.body, s.status, s.cacheControl
		s.times = append(s.times, time.Now())
		s.mu.Unlock()
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Srv.Close)
	return s
}

// Serve changes the answer: body with status, and a Cache-Control
// header unless cacheControl is "".
func (s *Server) Serve(body []byte, status int, cacheControl string) {
	s.mu.Lock()
	s.body, s.status, s.cacheControl = body, status, cacheControl
	s.mu.Unlock()
}

// Requests is the number of requests served.
func (s *Server) Requests() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.times))
}

// RequestTimes is when each request came, oldest first.
func (s *Server) RequestTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...)
}
