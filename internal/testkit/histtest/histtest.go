// Package histtest is the histogram the otelhist tests record into and
// compare with the OpenTelemetry SDK's: its scope, name and bounds,
// sampled span contexts for exemplars, and a meter provider that records
// histograms as the sidecar does.
package histtest

import (
	"context"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/internal/otelhist"
	"github.com/svc-dev/svc/internal/otelhist/sdkexport"
)

// The test histogram's name, description and unit.
const (
	Name = "svc.test.duration"
	Desc = "Time to do the thing."
	Unit = "s"
)

// Scope is the instrumentation scope of the test histogram.
var Scope = otelhist.Scope{Name: "example.com/hist", Version: "v1.2.3", SchemaURL: "https://opentelemetry.io/schemas/1.43.0"}

// Bounds returns the test histogram's bucket bounds, a fresh slice.
func Bounds() []float64 {
	return []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05}
}

// Sampled is a context with a sampled span of trace and span ids made
// from i.
func Sampled(i int) context.Context {
	var tid trace.TraceID
	var sid trace.SpanID
	tid[0], tid[15] = byte(i>>8)|1, byte(i)
	sid[0], sid[7] = byte(i>>8)|1, byte(i)
	return trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled,
	}))
}

// Provider is an SDK MeterProvider whose reader also collects an
// otelhist.Registry, as the sidecar's telemetry is, and that reader.
func Provider() (sdkexport.MeterProvider, *sdkmetric.ManualReader) {
	reg := otelhist.NewRegistry(otelhist.Options{})
	reader := sdkmetric.NewManualReader(sdkmetric.WithProducer(sdkexport.Producer(reg)))
	return sdkexport.MeterProvider{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), Registry: reg}, reader
}
