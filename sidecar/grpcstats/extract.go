package grpcstats

import (
	"context"
	"reflect"
	"slices"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc/metadata"
)

// extractor takes the caller's trace context from a call's incoming
// metadata with a propagator.
//
// Most calls carry no trace context (an Envoy without tracing). For them
// extraction is skipped: newExtractor lets the propagator extract from a
// carrier that holds nothing and notes the keys it asked for. When it
// asked for no key list and returned its context unchanged, a call whose
// metadata holds none of those keys would have it ask for the same keys,
// get the same empty answers and return the context unchanged too, so
// looking the keys up is enough. That holds for a propagator whose reads
// depend on the carrier alone, as OpenTelemetry's do (TraceContext,
// Baggage, composites of them). A propagator that lists the carrier's
// keys is extracted on every call.
type extractor struct {
	prop propagation.TextMapPropagator
	// keys are the keys the propagator reads from an empty carrier;
	// meaningful only with skippable.
	keys      []string
	skippable bool
}

func newExtractor(p propagation.TextMapPropagator) extractor {
	probe := &probeCarrier{}
	in := context.WithValue(context.Background(), probeKey{}, true)
	out := p.Extract(in, probe)
	same := out != nil && reflect.TypeOf(out).Comparable() && out == in
	return extractor{prop: p, keys: probe.keys, skippable: same && !probe.listed}
}

// extract returns ctx with the caller's trace context (and whatever else
// the propagator takes, such as baggage) from ctx's incoming metadata.
func (e extractor) extract(ctx context.Context) context.Context {
	if e.skippable && !e.anyKey(ctx) {
		return ctx
	}
	return e.prop.Extract(ctx, mdCarrier{ctx})
}

// anyKey reports whether the metadata has one of the propagator's keys.
func (e extractor) anyKey(ctx context.Context) bool {
	for _, k := range e.keys {
		// A missing key costs a lookup; only a present one is copied.
		if metadata.ValueFromIncomingContext(ctx, k) != nil {
			return true
		}
	}
	return false
}

// mdCarrier reads a call's incoming metadata. Keys match in any case, as
// gRPC metadata keys do.
type mdCarrier struct{ ctx context.Context }

var _ propagation.TextMapCarrier = mdCarrier{}

// Get returns the first value of key, or "".
func (c mdCarrier) Get(key string) string {
	if v := metadata.ValueFromIncomingContext(c.ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// Set does nothing: the carrier only extracts.
func (mdCarrier) Set(string, string) {}

// Keys returns the metadata's keys, lower case.
func (c mdCarrier) Keys() []string {
	md, _ := metadata.FromIncomingContext(c.ctx)
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	return keys
}

type probeKey struct{}

// probeCarrier is an empty carrier that notes what it is asked. It
// implements what mdCarrier does and no more, so that a propagator
// takes the same branches with both.
type probeCarrier struct {
	keys   []string
	listed bool
}

func (p *probeCarrier) Get(key string) string {
	if !slices.Contains(p.keys, key) {
		p.keys = append(p.keys, key)
	}
	return ""
}

func (*probeCarrier) Set(string, string) {}

func (p *probeCarrier) Keys() []string {
	p.listed = true
	return nil
}
