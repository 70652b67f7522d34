// Package sdkexport hands the histograms of an otelhist.Registry to the
// OpenTelemetry SDK's metric readers.
package sdkexport

import (
	"context"

	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/svc-dev/svc/internal/otelhist"
)

// MeterProvider is an SDK MeterProvider with the otelhist.Registry its
// readers collect through Producer: a component that finds the Registry
// (otelhist.From) records its histograms there, everything else records
// in the SDK. A nil Registry leaves every histogram to the SDK.
type MeterProvider struct {
	*sdkmetric.MeterProvider
	Registry *otelhist.Registry
}

var _ otelhist.Provider = MeterProvider{}

// Histograms returns the Registry.
func (p MeterProvider) Histograms() *otelhist.Registry { return p.Registry }

// Producer returns the Producer of reg's histograms, for
// sdkmetric.WithProducer and the Prometheus exporter's WithProducer:
// each collection gets them as the SDK's Float64Histogram would give
// them, grouped by scope in the order the scopes first came.
func Producer(reg *otelhist.Registry) sdkmetric.Producer { return producer{reg} }

type producer struct{ reg *otelhist.Registry }

func (p producer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	var out []metricdata.ScopeMetrics
	for _, d := range p.reg.Collect() {
		scope := instrumentation.Scope{
			Name: d.Scope.Name, Version: d.Scope.Version, SchemaURL: d.Scope.SchemaURL, Attributes: d.Scope.Attributes,
		}
		i := len(out) - 1
		for ; i >= 0; i-- {
			if s := out[i].Scope; s.Name == scope.Name && s.Version == scope.Version &&
				s.SchemaURL == scope.SchemaURL && s.Attributes.Equals(&scope.Attributes) {
				break
			}
		}
		if i < 0 {
			out = append(out, metricdata.ScopeMetrics{Scope: scope})
			i = len(out) - 1
		}
		out[i].Metrics = append(out[i].Metrics, metrics(d))
	}
	return out, nil
}

// metrics is d as the SDK's cumulative explicit-bucket histogram.
func metrics(d otelhist.Data) metricdata.Metrics {
	dps := make([]metricdata.HistogramDataPoint[float64], len(d.Points))
	for i, pt := range d.Points {
		dps[i] = metricdata.HistogramDataPoint[float64]{
			Attributes:   pt.Attributes,
			StartTime:    d.Start,
			Time:         d.Time,
			Count:        pt.Count,
			Bounds:       d.Bounds,
			BucketCounts: pt.BucketCounts,
			Min:          metricdata.NewExtrema(pt.Min),
			Max:          metricdata.NewExtrema(pt.Max),
			Sum:          pt.Sum,
		}
		if len(pt.Exemplars) > 0 {
			exs := make([]metricdata.Exemplar[float64], len(pt.Exemplars))
			for j, e := range pt.Exemplars {
				exs[j] = metricdata.Exemplar[float64]{Time: e.Time, Value: e.Value, TraceID: e.TraceID, SpanID: e.SpanID}
			}
			dps[i].Exemplars = exs
		}
	}
	return metricdata.Metrics{
		Name:        d.Name,
		Description: d.Description,
		Unit:        d.Unit,
		Data: metricdata.Histogram[float64]{
			DataPoints:  dps,
			Temporality: metricdata.CumulativeTemporality,
		},
	}
}
