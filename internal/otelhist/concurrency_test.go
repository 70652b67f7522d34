package otelhist_test

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/internal/otelhist"
)

// TestConcurrent records from many goroutines while others collect: no
// measurement is lost, cumulative counts never go back, and every
// exemplar is one measurement whole (its trace and span ids are made
// from its value), never a mix of two.
func TestConcurrent(t *testing.T) {
	reg := otelhist.NewRegistry(otelhist.Options{})
	h := reg.Histogram(scope, name, desc, unit, bounds)
	sets := []attribute.Set{
		attribute.NewSet(attribute.String("k", "a")),
		attribute.NewSet(attribute.String("k", "b")),
	}
	const workers, perWorker = 8, 2000
	// Values that add exactly: multiples of 1/1024.
	value := func(w, i int) float64 { return float64((w*perWorker+i)%64) / 1024 }
	ctxOf := func(v float64) context.Context {
		var tid trace.TraceID
		var sid trace.SpanID
		binary.BigEndian.PutUint64(tid[8:], math.Float64bits(v))
		tid[0] = 1
		binary.BigEndian.PutUint64(sid[:], math.Float64bits(v)|1)
		return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
		}))
	}
	check := func(ds []otelhist.Data, last map[string]uint64) {
		for _, d := range ds {
			for _, dp := range d.Points {
				key := dp.Attributes.Encoded(attribute.DefaultEncoder())
				if dp.Count < last[key] {
					t.Errorf("%s: count went back from %d to %d", key, last[key], dp.Count)
				}
				last[key] = dp.Count
				for _, e := range dp.Exemplars {
					want := binary.BigEndian.AppendUint64([]byte{1, 0, 0, 0, 0, 0, 0, 0}, math.Float64bits(e.Value))
					if string(e.TraceID) != string(want) ||
						binary.BigEndian.Uint64(e.SpanID) != math.Float64bits(e.Value)|1 {
						t.Errorf("torn exemplar: %+v", e)
					}
				}
			}
		}
	}

	var wg sync.WaitGroup
	done := make(chan struct{})
	var collectors sync.WaitGroup
	for range 2 {
		collectors.Add(1)
		go func() {
			defer collectors.Done()
			last := map[string]uint64{}
			for {
				check(reg.Collect(), last)
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := h.Bind(sets[w%len(sets)])
			for i := range perWorker {
				v := value(w, i)
				s.Record(ctxOf(v), v)
			}
		}()
	}
	wg.Wait()
	close(done)
	collectors.Wait()

	ds := reg.Collect()
	check(ds, map[string]uint64{})
	wantSum := map[string]float64{}
	for w := range workers {
		key := sets[w%len(sets)].Encoded(attribute.DefaultEncoder())
		for i := range perWorker {
			wantSum[key] += value(w, i)
		}
	}
	var total uint64
	for _, dp := range ds[0].Points {
		key := dp.Attributes.Encoded(attribute.DefaultEncoder())
		total += dp.Count
		if dp.Sum != wantSum[key] {
			t.Errorf("%s: sum %v, want %v", key, dp.Sum, wantSum[key])
		}
		if dp.Min != 0 || dp.Max != 63.0/1024 {
			t.Errorf("%s: min %v, max %v", key, dp.Min, dp.Max)
		}
	}
	if total != workers*perWorker {
		t.Errorf("count %d, want %d", total, workers*perWorker)
	}
}
