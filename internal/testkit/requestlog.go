package testkit

import (
	"net/http"
	"sync"
)

// Request is what a RequestLog keeps of a request: its path and its
// Authorization header.
type Request struct {
	Path, Authorization string
}

// RequestLog records the requests a test server got; its handlers may
// add to it from their goroutines while the test reads it.
type RequestLog struct {
	mu  sync.Mutex
	got []Request
}

// Add records r.
func (l *RequestLog) Add(r *http.Request) {
	l.mu.Lock()
	l.got = append(l.got, Request{Path: r.URL.Path, Authorization: r.Header.Get("Authorization")})
	l.mu.Unlock()
}

// List returns the requests recorded so far, in the order they came.
func (l *RequestLog) List() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Request(nil), l.got...)
}
