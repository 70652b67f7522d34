// Package audittest holds an audit sink for tests: it keeps every record
// in memory.
package audittest

import (
	"sync"
	"testing"

	"github.com/svc-dev/svc/engine/audit"
)

// Sink keeps the records logged to it, safe for concurrent use. The zero
// value is ready.
type Sink struct {
	mu   sync.Mutex
	recs []audit.Record
}

// Log keeps r.
func (s *Sink) Log(r audit.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
}

// Records is a copy of the records kept so far, oldest first.
func (s *Sink) Records() []audit.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]audit.Record(nil), s.recs...)
}

// Last is the latest record; it fails t when there is none.
func (s *Sink) Last(t testing.TB) audit.Record {
	t.Helper()
	recs := s.Records()
	if len(recs) == 0 {
		t.Fatal("no audit record")
	}
	return recs[len(recs)-1]
}
