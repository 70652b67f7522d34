package telemetry

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/svc-dev/svc/internal/otelhist"
	"github.com/svc-dev/svc/internal/otelhist/sdkexport"
)

// histogramsFit reports whether exp exports histograms as an
// otelhist.Registry produces them: cumulative, in explicit buckets with
// min and max. OTLP's are unless OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE
// or OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION say
// otherwise; then every histogram stays the SDK's.
func histogramsFit(exp sdkmetric.Exporter) bool {
	if exp.Temporality(sdkmetric.InstrumentKindHistogram) != metricdata.CumulativeTemporality {
		return false
	}
	switch a := exp.Aggregation(sdkmetric.InstrumentKindHistogram).(type) {
	case sdkmetric.AggregationDefault:
		return true
	case sdkmetric.AggregationExplicitBucketHistogram:
		// The instruments' boundaries replace the aggregation's.
		return !a.NoMinMax
	}
	return false
}

// scopeMerger is an exporter that merges the scopes a Producer added
// after the SDK's into the SDK's ones of the same scope, so that a
// scope's metrics reach the collector together, as when the SDK
// recorded them all.
type scopeMerger struct{ sdkmetric.Exporter }

func (e scopeMerger) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	rm.ScopeMetrics = mergeScopes(rm.ScopeMetrics)
	return e.Exporter.Export(ctx, rm)
}

// mergeScopes moves the metrics of each scope that appeared before into
// its first ScopeMetrics, keeping the order of first appearance. It
// writes new slices: the reader reuses its own for the next collection.
func mergeScopes(sms []metricdata.ScopeMetrics) []metricdata.ScopeMetrics {
	out := make([]metricdata.ScopeMetrics, 0, len(sms))
	for _, sm := range sms {
		merged := false
		for i := range out {
			s := out[i].Scope
			if s.Name == sm.Scope.Name && s.Version == sm.Scope.Version && s.SchemaURL == sm.Scope.SchemaURL &&
				s.Attributes.Equals(&sm.Scope.Attributes) {
				out[i].Metrics = append(slices.Clip(out[i].Metrics), sm.Metrics...)
				merged = true
				break
			}
		}
		if !merged {
			out = append(out, sm)
		}
	}
	return out
}

// meters returns the provider components get: the SDK's, and the
// otelhist.Registry its readers collect when hist is set (nil when a
// reader wants histograms the Registry cannot give, see histogramsFit),
// in which the histograms recorded on every request
// (svc.decision.duration, rpc.server.call.duration) are recorded without
// the SDK's per-record cost. Its readers export both the same way.
func meters(mp *sdkmetric.MeterProvider, hist *otelhist.Registry) metric.MeterProvider {
	return sdkexport.MeterProvider{MeterProvider: mp, Registry: hist}
}
