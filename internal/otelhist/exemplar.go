package otelhist

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// exemplarSlot holds the exemplar of one bucket: a reservoir of one,
// which keeps each of the n measurements offered since the last
// collection with probability 1/n (the SDK's Algorithm L with k = 1
// samples the same way). Its fields are written under a sequence lock
// made of seq: odd while a writer stores, even otherwise, 0 before the
// first exemplar. Every field is atomic, so that a reader that raced a
// writer reads torn values it then throws away, not a data race.
type exemplarSlot struct {
	seq atomic.Uint64
	// offers counts the measurements offered since the last collection.
	offers atomic.Int64

	value atomic.Uint64 // float64 bits
	time  atomic.Int64  // Unix nanoseconds
	trace [2]atomic.Uint64
	span  atomic.Uint64
	// ids: 1 with a trace id, 2 with a span id.
	ids atomic.Uint32
}

const (
	hasTraceID = 1 << iota
	hasSpanID
)

// offer offers v, measured in ctx, as the slot's exemplar. A writer that
// finds another storing gives way: the other's measurement is kept.
func (e *exemplarSlot) offer(ctx context.Context, v float64) {
	n := e.offers.Add(1)
	if n > 1 && rand.Int64N(n) != 0 {
		return
	}
	s := e.seq.Load()
	if s&1 != 0 || !e.seq.CompareAndSwap(s, s+1) {
		return
	}
	sc := trace.SpanContextFromContext(ctx)
	var ids uint32
	if sc.HasTraceID() {
		ids |= hasTraceID
	}
	if sc.HasSpanID() {
		ids |= hasSpanID
	}
	tid, sid := sc.TraceID(), sc.SpanID()
	e.value.Store(math.Float64bits(v))
	e.time.Store(time.Now().UnixNano())
	e.trace[0].Store(binary.BigEndian.Uint64(tid[:8]))
	e.trace[1].Store(binary.BigEndian.Uint64(tid[8:]))
	e.span.Store(binary.BigEndian.Uint64(sid[:]))
	e.ids.Store(ids)
	e.seq.Store(s + 2)
}

// collect reads the slot's exemplar into dst and restarts the sampling;
// false when it holds none. The exemplar is kept for the next
// collection, as the SDK keeps it.
func (e *exemplarSlot) collect(dst *Exemplar) bool {
	defer e.offers.Store(0)
	// A writer holds the lock for a few stores; a reader that keeps
	// missing gives up on this exemplar for this collection.
	for range 1000 {
		s := e.seq.Load()
		if s == 0 {
			return false
		}
		if s&1 != 0 {
			runtime.Gosched()
			continue
		}
		v := e.value.Load()
		t := e.time.Load()
		t0, t1, sp := e.trace[0].Load(), e.trace[1].Load(), e.span.Load()
		ids := e.ids.Load()
		if e.seq.Load() != s {
			continue
		}
		*dst = Exemplar{Time: time.Unix(0, t), Value: math.Float64frombits(v)}
		if ids&hasSpanID != 0 {
			dst.SpanID = binary.BigEndian.AppendUint64(make([]byte, 0, 8), sp)
		}
		if ids&hasTraceID != 0 {
			tid := make([]byte, 0, 16)
			tid = binary.BigEndian.AppendUint64(tid, t0)
			dst.TraceID = binary.BigEndian.AppendUint64(tid, t1)
		}
		return true
	}
	return false
}
