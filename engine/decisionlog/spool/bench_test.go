package spool_test

import (
	"bytes"
	"slices"
	"testing"
	"time"

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

// BenchmarkAppendWhileShipping is Append's latency while a reader ships
// batches as the decision log does (Read of 500 records into one Batch,
// then Ack): the p99 and the worst Append, which wait for whatever the
// reader does under the spool's lock.
func BenchmarkAppendWhileShipping(b *testing.B) {
	s := open(b, spool.Options{Dir: b.TempDir(), MaxBytes: 8 << 30})
	rec := bytes.Repeat([]byte("x"), 1300)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		batch := new(spool.Batch)
		for {
			select {
			case <-stop:
				return
			default:
			}
			es, err := s.Read(batch, 500, 4<<20)
			if err != nil {
				b.Error(err)
				return
			}
			if len(es) > 0 {
				s.Ack(es[len(es)-1].Next)
			}
		}
	}()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if err := s.Append(rec); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	close(stop)
	<-done
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(lat[len(lat)*999/1000].Nanoseconds()), "p99.9-ns")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
}
