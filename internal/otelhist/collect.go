package otelhist

import (
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// Data is a histogram as collected: its description and the series that
// hold a measurement.
type Data struct {
	Scope       Scope
	Name        string
	Description string
	Unit        string
	// Start is when the histogram was made, the start of its cumulative
	// counts.
	Start time.Time
	// Time is when it was collected.
	Time   time.Time
	Bounds []float64
	Points []Point
}

// Point is a series as collected.
type Point struct {
	Attributes attribute.Set
	// BucketCounts has len(Bounds)+1 counts; Count is their sum.
	BucketCounts []uint64
	Count        uint64
	Sum          float64
	Min, Max     float64
	// Exemplars are those of the buckets that have one, in bucket order.
	Exemplars []Exemplar
}

// Exemplar is a measurement kept as an example of its bucket. TraceID
// and SpanID are empty when its context had none.
type Exemplar struct {
	Time    time.Time
	Value   float64
	TraceID []byte
	SpanID  []byte
}

// Collect returns the histograms that hold a measurement, in the order
// they were made, and restarts the sampling of exemplars.
func (r *Registry) Collect() []Data {
	r.mu.Lock()
	hists := slices.Clone(r.hists)
	r.mu.Unlock()
	now := time.Now()
	var out []Data
	for _, h := range hists {
		if d, ok := h.collect(now); ok {
			out = append(out, d)
		}
	}
	return out
}

// collect returns the histogram's data; false when no series holds a
// measurement.
func (h *Histogram) collect(now time.Time) (Data, bool) {
	h.mu.Lock()
	live := slices.Clone(h.live)
	h.mu.Unlock()
	d := Data{
		Scope: h.scope, Name: h.name, Description: h.description, Unit: h.unit,
		Start: h.start, Time: now, Bounds: slices.Clone(h.bounds),
		Points: make([]Point, 0, len(live)),
	}
	for _, p := range live {
		pt := Point{Attributes: p.attrs, BucketCounts: make([]uint64, len(p.counts))}
		for i := range p.counts {
			c := p.counts[i].Load()
			pt.BucketCounts[i] = c
			pt.Count += c
		}
		if pt.Count == 0 {
			// Activated by a measurement still under way.
			continue
		}
		pt.Sum = p.sum()
		pt.Min = math.Float64frombits(p.min.Load())
		pt.Max = math.Float64frombits(p.max.Load())
		for i := range p.exemplars {
			var e Exemplar
			if p.exemplars[i].collect(&e) {
				pt.Exemplars = append(pt.Exemplars, e)
			}
		}
		d.Points = append(d.Points, pt)
	}
	return d, len(d.Points) > 0
}
