package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
)

func BenchmarkLog(b *testing.B) {
	l := New(io.Discard, Options{})
	r := fullRecord()
	b.ReportAllocs()
	for b.Loop() {
		l.Log(r)
	}
	closeReportingDrops(b, l)
}

func BenchmarkLogParallel(b *testing.B) {
	l := New(io.Discard, Options{})
	r := fullRecord()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Log(r)
		}
	})
	closeReportingDrops(b, l)
}

// BenchmarkLogQueueFull measures the drop path: the writer is stuck and the
// queue is full, so every Log only counts a drop.
func BenchmarkLogQueueFull(b *testing.B) {
	g := newGateWriter()
	l := New(g, Options{QueueSize: 1})
	r := fullRecord()
	l.Log(r)
	<-g.entered
	l.Log(r)
	b.ReportAllocs()
	for b.Loop() {
		l.Log(r)
	}
	b.StopTimer()
	close(g.release)
	if err := l.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	if s := l.Stats(); s.Written != 2 {
		b.Fatalf("written = %d, want 2", s.Written)
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	r := fullRecord()
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSON(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
}

// plainRecord has Record's fields without its MarshalJSON method, so that
// encoding/json uses reflection: the baseline AppendJSON is measured against.
type plainRecord Record

func BenchmarkEncodingJSON(b *testing.B) {
	r := plainRecord(fullRecord())
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := enc.Encode(&r); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(buf.Len()))
}

// BenchmarkWriterAdd measures the writer goroutine's work per record, as
// the sidecar logs it (LogTraced: the trace ids as bytes): encoding into
// the batch, and the batch's write once it is full.
func BenchmarkWriterAdd(b *testing.B) {
	l := &Logger{out: io.Discard, log: slog.New(slog.DiscardHandler)}
	w := writer{Logger: l, batch: make([]byte, 0, batchSize+1024)}
	r := fullRecord()
	r.TraceID, r.SpanID = "", ""
	q := queued{rec: r, ids: rawIDs{trace: [16]byte{0x4b, 0xf9, 0x2f}, span: [8]byte{0, 0xf0, 0x67}, set: true}}
	b.ReportAllocs()
	for b.Loop() {
		w.add(&q)
	}
	w.flush()
}

// closeReportingDrops stops b's timer, closes l and reports the share of
// records it dropped.
func closeReportingDrops(b *testing.B, l *Logger) {
	b.StopTimer()
	if err := l.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	s := l.Stats()
	b.ReportMetric(float64(s.Dropped)/float64(s.Written+s.Dropped), "dropped/op")
}
