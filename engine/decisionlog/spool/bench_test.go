package spool_test

import (
	"bytes"
	"testing"

	"github.com/svc-dev/svc/engine/decisionlog/spool"
)

// BenchmarkAppend is the cost the decision path pays per record: a frame
// written to the segment file (no fsync; that runs on a timer), from
// every core at once. The record is the size of a decision log record
// with its input.
func BenchmarkAppend(b *testing.B) {
	s := open(b, spool.Options{Dir: b.TempDir(), MaxBytes: 8 << 30})
	rec := bytes.Repeat([]byte("x"), 900)
	b.ReportAllocs()
	b.SetBytes(int64(len(rec)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Append(rec); err != nil {
				b.Fatal(err)
			}
		}
	})
}
