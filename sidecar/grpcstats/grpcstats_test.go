package grpcstats

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestRecorded compares what the handler records for calls of every
// kind with the golden files, which hold what otelgrpc v0.72's server
// handler recorded for the same calls (span names, kinds, attributes,
// statuses and parents; the duration histogram's points), under
// samplers that record every span, none, or follow the caller.
func TestRecorded(t *testing.T) {
	samplers := []struct {
		name    string
		sampler sdktrace.Sampler
	}{
		{"always_on", sdktrace.AlwaysSample()},
		{"always_off", sdktrace.NeverSample()},
		{"parentbased_always_on", sdktrace.ParentBased(sdktrace.AlwaysSample())},
		{"parentbased_always_off", sdktrace.ParentBased(sdktrace.NeverSample())},
	}
	for _, s := range samplers {
		t.Run(s.name, func(t *testing.T) {
			got := runScenario(t, s.sampler, ourHandler(t), scenario())
			path := filepath.Join("testdata", s.name+".json")
			if *update {
				b, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var want observed
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("recorded (-%s +got):\n%s", path, d)
			}
		})
	}
}

// TestExtractSkipsOnlyWhatChangesNothing: the extractor's shortcut (no
// propagator key in the metadata: no extraction) gives the context the
// propagator gives, for metadata with and without trace context and
// baggage, in any case, malformed or repeated.
func TestExtractSkipsOnlyWhatChangesNothing(t *testing.T) {
	props := map[string]propagation.TextMapPropagator{
		"tracecontext+baggage": propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		"tracecontext":         propagation.TraceContext{},
		"lister":               keyLister{},
	}
	mds := callMetadata()
	for pn, prop := range props {
		e := newExtractor(prop)
		for mn, md := range mds {
			t.Run(pn+"/"+mn, func(t *testing.T) {
				ctx := context.Background()
				if md != nil {
					ctx = metadata.NewIncomingContext(ctx, md)
				}
				want := prop.Extract(ctx, mdCarrier{ctx})
				got := e.extract(ctx)
				if g, w := trace.SpanContextFromContext(got), trace.SpanContextFromContext(want); !g.Equal(w) {
					t.Errorf("span context %v, want %v", g, w)
				}
				if g, w := baggage.FromContext(got).String(), baggage.FromContext(want).String(); g != w {
					t.Errorf("baggage %q, want %q", g, w)
				}
				if (got == ctx) != (want == ctx) {
					t.Errorf("context changed = %v, want %v", got != ctx, want != ctx)
				}
			})
		}
	}
	if e := newExtractor(keyLister{}); e.skippable {
		t.Error("a propagator that lists the carrier's keys must be extracted on every call")
	}
	if e := newExtractor(propagation.TraceContext{}); !e.skippable || !cmp.Equal(e.keys, []string{"traceparent"}) {
		t.Errorf("TraceContext: skippable %v, keys %v; want skippable with [traceparent]", e.skippable, e.keys)
	}
}

// keyLister is a propagator that reads every key of the carrier, as
// propagators of key prefixes (uberctx-…) do.
type keyLister struct{}

type listerKey struct{}

func (keyLister) Inject(context.Context, propagation.TextMapCarrier) {}

func (keyLister) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	for _, k := range c.Keys() {
		if k == "x-lister" {
			return context.WithValue(ctx, listerKey{}, c.Get(k))
		}
	}
	return ctx
}

func (keyLister) Fields() []string { return []string{"x-lister"} }

// TestMethodTableBound: the table keeps at most maxMethods methods; a
// method beyond is still recorded, with options built for the call.
func TestMethodTableBound(t *testing.T) {
	var tb methodTable
	for i := range maxMethods {
		if tb.get("/svc.test.M/M"+string(rune('a'+i%26))+string(rune('a'+i/26))) == nil {
			t.Fatalf("method %d refused below the bound", i)
		}
	}
	if tb.get("/svc.test.M/Beyond") != nil {
		t.Error("a method beyond the bound was kept")
	}
	if tb.get("/svc.test.M/Ma"+"a") == nil {
		t.Error("a kept method is no longer found")
	}
	if n := len(*tb.m.Load()); n != maxMethods {
		t.Errorf("table holds %d methods, want %d", n, maxMethods)
	}
}
