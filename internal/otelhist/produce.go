package otelhist

import (
	"context"
	"math"
	"slices"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

var _ sdkmetric.Producer = (*Registry)(nil)

// Produce returns the histograms that hold a measurement, grouped by
// scope in the order the scopes were first given, for a metric reader
// (sdkmetric.WithProducer).
func (r *Registry) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	r.mu.Lock()
	hists := slices.Clone(r.hists)
	r.mu.Unlock()
	now := time.Now()
	var out []metricdata.ScopeMetrics
	for _, h := range hists {
		m, ok := h.collect(now)
		if !ok {
			continue
		}
		i := slices.IndexFunc(out, func(sm metricdata.ScopeMetrics) bool {
			return sm.Scope.Name == h.scope.Name && sm.Scope.Version == h.scope.Version &&
				sm.Scope.SchemaURL == h.scope.SchemaURL && sm.Scope.Attributes.Equals(&h.scope.Attributes)
		})
		if i < 0 {
			out = append(out, metricdata.ScopeMetrics{Scope: h.scope})
			i = len(out) - 1
		}
		out[i].Metrics = append(out[i].Metrics, m)
	}
	return out, nil
}

// collect returns the histogram's data; false when no series holds a
// measurement.
func (h *Histogram) collect(now time.Time) (metricdata.Metrics, bool) {
	h.mu.Lock()
	live := slices.Clone(h.live)
	h.mu.Unlock()
	dps := make([]metricdata.HistogramDataPoint[float64], 0, len(live))
	bounds := slices.Clone(h.bounds)
	for _, p := range live {
		dp := metricdata.HistogramDataPoint[float64]{
			Attributes:   p.attrs,
			StartTime:    h.start,
			Time:         now,
			Bounds:       bounds,
			BucketCounts: make([]uint64, len(p.counts)),
		}
		for i := range p.counts {
			c := p.counts[i].Load()
			dp.BucketCounts[i] = c
			dp.Count += c
		}
		if dp.Count == 0 {
			// Activated by a measurement still under way.
			continue
		}
		dp.Sum = p.sum()
		dp.Min = metricdata.NewExtrema(math.Float64frombits(p.min.Load()))
		dp.Max = metricdata.NewExtrema(math.Float64frombits(p.max.Load()))
		for i := range p.exemplars {
			var e metricdata.Exemplar[float64]
			if p.exemplars[i].collect(&e) {
				dp.Exemplars = append(dp.Exemplars, e)
			}
		}
		dps = append(dps, dp)
	}
	if len(dps) == 0 {
		return metricdata.Metrics{}, false
	}
	return metricdata.Metrics{
		Name:        h.name,
		Description: h.description,
		Unit:        h.unit,
		Data: metricdata.Histogram[float64]{
			DataPoints:  dps,
			Temporality: metricdata.CumulativeTemporality,
		},
	}, true
}
