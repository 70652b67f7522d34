package grpcstats

import (
	"context"
	"reflect"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"
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
//
// The keys it reads from an empty carrier are those that can start a
// context: a key the propagator reads only once another was found (W3C
// tracestate, after traceparent) is not among them.
type extractor struct {
	prop propagation.TextMapPropagator
	// keys are the keys the propagator reads from an empty carrier;
	// meaningful only with skippable.
	keys      []string
	skippable bool
	// lower are keys in lower case, for the tap.
	lower []string
}

func newExtractor(p propagation.TextMapPropagator) extractor {
	probe := &probeCarrier{}
	in := context.WithValue(context.Background(), probeKey{}, true)
	out := p.Extract(in, probe)
	same := out != nil && reflect.TypeOf(out).Comparable() && out == in
	lower := make([]string, len(probe.keys))
	for i, k := range probe.keys {
		lower[i] = strings.ToLower(k)
	}
	return extractor{prop: p, keys: probe.keys, skippable: same && !probe.listed, lower: lower}
}

// tappedKey marks the context of a call whose headers the tap found a
// key of the propagator in.
type tappedKey struct{}

// tap is the server's tap handle (grpc.InTapHandle): it marks the
// context of a call whose headers hold one of the propagator's keys, so
// that the interceptor extracts only then (tapped). The tap sees the
// call's metadata as the HTTP/2 transport decoded it, the map the
// call's context then carries, where every key is lower case: the
// transport refuses a header whose name has an upper-case letter (HTTP/2
// requires lower case; x/net/http2's validWireHeaderFieldName, checked
// for every header the server's framer decodes). A lookup of the key in
// lower case is therefore exact, where metadata.ValueFromIncomingContext
// must compare a missing key with every key of the call in any case.
//
// The transport runs the tap under its lock: it does the lookups only,
// never the extraction.
func (e extractor) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if !e.skippable {
		return ctx, nil
	}
	for _, k := range e.lower {
		if _, ok := info.Header[k]; ok {
			return context.WithValue(ctx, tappedKey{}, true), nil
		}
	}
	return ctx, nil
}

// tapped reports whether the caller's context is to be extracted from a
// call that went through tap: always when the propagator cannot be
// skipped, else when the tap marked it.
func (e extractor) tapped(ctx context.Context) bool {
	return !e.skippable || ctx.Value(tappedKey{}) != nil
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
