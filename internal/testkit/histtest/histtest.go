// Package histtest is the histogram the otelhist tests record into and
// compare with the OpenTelemetry SDK's: its scope, name and bounds, and
// sampled span contexts for exemplars.
package histtest

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/internal/otelhist"
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
