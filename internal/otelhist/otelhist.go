// Package otelhist records explicit-bucket histograms without a lock, for
// the histograms recorded on every request; package sdkexport exports
// them through the OpenTelemetry SDK's metric Producer. This package
// depends on the OpenTelemetry API only, so that a component can offer
// to record here without taking in the SDK.
//
// The SDK's synchronous histogram resolves the attributes of every
// measurement, looks their set up in a map and takes a lock in its
// exemplar reservoir. Here the attribute set is bound once (Bind), and a
// measurement is a few atomic operations on the bound series (Record).
// A Registry holds the histograms; attached to the readers of a
// MeterProvider (sdkexport.Producer with sdkmetric.WithProducer, the
// Prometheus exporter's WithProducer), it hands them to every
// collection as the SDK would: the
// same metricdata.Histogram (cumulative temporality, the bucket counts,
// count, sum, min and max of each series, a start time that is the
// histogram's creation), the same cardinality limit and overflow series,
// and exemplars chosen as the SDK chooses them (the exemplar filter of
// OTEL_METRICS_EXEMPLAR_FILTER, one exemplar per bucket sampled
// uniformly from the bucket's measurements since the last collection).
//
// What differs: the SDK keeps one exemplar reservoir per reader, a
// Registry one per series for all readers, so a collection by one reader
// restarts the sampling of the others; exemplar times carry no monotonic
// clock reading. It serves cumulative explicit-bucket histograms only: a
// reader that wants another temporality or aggregation must record with
// the SDK's histograms (see Provider).
package otelhist

import (
	"context"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Provider is implemented by a MeterProvider whose readers also collect a
// Registry: an instrumented component records its hot histograms there
// when Histograms returns one, and with the MeterProvider's own
// histograms otherwise.
type Provider interface {
	metric.MeterProvider
	// Histograms returns the Registry the provider's readers collect, or
	// nil when they cannot take its histograms.
	Histograms() *Registry
}

// From returns the Registry of mp, or nil when mp has none.
func From(mp metric.MeterProvider) *Registry {
	if p, ok := mp.(Provider); ok {
		return p.Histograms()
	}
	return nil
}

// DefaultCardinalityLimit is the SDK's default limit of series per
// histogram.
const DefaultCardinalityLimit = 2000

// overflowSet is the attributes of the series that takes the
// measurements of the series beyond the cardinality limit, as the SDK's.
var overflowSet = attribute.NewSet(attribute.Bool("otel.metric.overflow", true))

// Filter decides which measurements are offered as exemplars, as the
// SDK's exemplar.Filter.
type Filter func(context.Context) bool

// TraceBased offers the measurements made under a sampled span, the
// SDK's default filter.
func TraceBased(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsSampled() }

// AlwaysOn offers every measurement.
func AlwaysOn(context.Context) bool { return true }

// AlwaysOff offers none.
func AlwaysOff(context.Context) bool { return false }

// Scope is the instrumentation scope of a histogram: that of the Meter
// the SDK's instrument would come from.
type Scope struct {
	Name, Version, SchemaURL string
	Attributes               attribute.Set
}

func (s Scope) equal(o Scope) bool {
	return s.Name == o.Name && s.Version == o.Version && s.SchemaURL == o.SchemaURL && s.Attributes.Equals(&o.Attributes)
}

// Options configure a Registry.
type Options struct {
	// Filter decides which measurements are offered as exemplars. Nil
	// means TraceBased, the SDK's default.
	Filter Filter
	// CardinalityLimit bounds the series of each histogram, the overflow
	// series included; measurements of a series beyond it go to the
	// overflow series. 0 or less means no limit.
	CardinalityLimit int
}

// OptionsFromEnv are the Options an SDK MeterProvider built without
// options takes from the environment: OTEL_METRICS_EXEMPLAR_FILTER and
// OTEL_GO_X_CARDINALITY_LIMIT.
func OptionsFromEnv() Options {
	o := Options{Filter: TraceBased, CardinalityLimit: DefaultCardinalityLimit}
	switch strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_METRICS_EXEMPLAR_FILTER"))) {
	case "always_on":
		o.Filter = AlwaysOn
	case "always_off":
		o.Filter = AlwaysOff
	}
	if v := strings.TrimSpace(os.Getenv("OTEL_GO_X_CARDINALITY_LIMIT")); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			o.CardinalityLimit = n
		}
	}
	return o
}

// Registry holds histograms and produces their data for metric readers.
// It is safe for concurrent use.
type Registry struct {
	filter Filter
	limit  int

	mu    sync.Mutex
	hists []*Histogram // in creation order
}

// NewRegistry returns an empty Registry.
func NewRegistry(o Options) *Registry {
	if o.Filter == nil {
		o.Filter = TraceBased
	}
	return &Registry{filter: o.Filter, limit: o.CardinalityLimit}
}

// Histogram describes a histogram: its scope, name, description, unit
// and bucket boundaries, as given to the SDK's Meter and
// Float64Histogram.
type Histogram struct {
	r           *Registry
	scope       Scope
	name        string
	description string
	unit        string
	bounds      []float64 // sorted
	start       time.Time

	mu     sync.Mutex
	series map[attribute.Distinct]*Series
	live   []*point // series with a measurement, in order of the first
	// overflow is the series of the measurements beyond the limit.
	overflow *point
}

// Histogram returns the histogram of that identity, creating it the
// first time: as the SDK does for an instrument created twice, every
// caller records into the same one.
func (r *Registry) Histogram(scope Scope, name, description, unit string, bounds []float64) *Histogram {
	b := slices.Clone(bounds)
	slices.Sort(b)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.hists {
		if h.scope.equal(scope) && h.name == name && h.description == description && h.unit == unit && slices.Equal(h.bounds, b) {
			return h
		}
	}
	h := &Histogram{
		r: r, scope: scope, name: name, description: description, unit: unit, bounds: b,
		start:  time.Now(),
		series: make(map[attribute.Distinct]*Series),
	}
	r.hists = append(r.hists, h)
	return h
}

// Series is a histogram's series of one attribute set.
type Series struct {
	h     *Histogram
	attrs attribute.Set
	// dst is where measurements go: nil until the first, then the
	// series' own point or, beyond the cardinality limit, the overflow.
	dst atomic.Pointer[point]
}

// Bind returns the series of attrs, the same for equal sets. A series
// is exported from its first measurement on.
func (h *Histogram) Bind(attrs attribute.Set) *Series {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.series[attrs.Equivalent()]; ok {
		return s
	}
	s := &Series{h: h, attrs: attrs}
	h.series[attrs.Equivalent()] = s
	return s
}

// Record adds v to the series. ctx decides, through the Registry's
// filter, whether v is offered as an exemplar, and gives the exemplar
// its trace and span ids.
func (s *Series) Record(ctx context.Context, v float64) {
	p := s.dst.Load()
	if p == nil {
		p = s.h.activate(s)
	}
	i := sort.SearchFloat64s(p.bounds, v)
	// Min and max before the count: a collection that sees the count
	// sees them.
	p.updateMinMax(v)
	p.addSum(v)
	p.counts[i].Add(1)
	if s.h.r.filter(ctx) {
		p.exemplars[i].offer(ctx, v)
	}
}

// activate gives s its point at its first measurement, or the overflow
// point when the histogram holds as many series as the limit allows.
func (h *Histogram) activate(s *Series) *point {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p := s.dst.Load(); p != nil {
		return p
	}
	var p *point
	if lim := h.r.limit; lim > 0 && len(h.live) >= lim-1 {
		if h.overflow == nil {
			h.overflow = newPoint(overflowSet, h.bounds)
			h.live = append(h.live, h.overflow)
		}
		p = h.overflow
	} else {
		p = newPoint(s.attrs, h.bounds)
		h.live = append(h.live, p)
	}
	s.dst.Store(p)
	return p
}

// point holds the measurements of one exported series.
type point struct {
	attrs  attribute.Set
	bounds []float64
	counts []atomic.Uint64
	// The sum as the SDK keeps it: whole values in sumInt, the others
	// in sumFloat, so that the same measurements give the same sum.
	sumInt   atomic.Int64
	sumFloat atomic.Uint64
	// min and max as float64 bits; meaningful once a count is non-zero.
	min, max  atomic.Uint64
	exemplars []exemplarSlot
}

func newPoint(attrs attribute.Set, bounds []float64) *point {
	p := &point{
		attrs:     attrs,
		bounds:    bounds,
		counts:    make([]atomic.Uint64, len(bounds)+1),
		exemplars: make([]exemplarSlot, len(bounds)+1),
	}
	p.min.Store(math.Float64bits(math.Inf(1)))
	p.max.Store(math.Float64bits(math.Inf(-1)))
	return p
}

func (p *point) addSum(v float64) {
	if iv := int64(v); float64(iv) == v {
		p.sumInt.Add(iv)
		return
	}
	for {
		old := p.sumFloat.Load()
		if p.sumFloat.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (p *point) sum() float64 {
	return math.Float64frombits(p.sumFloat.Load()) + float64(p.sumInt.Load())
}

func (p *point) updateMinMax(v float64) {
	for {
		old := p.min.Load()
		if !(v < math.Float64frombits(old)) || p.min.CompareAndSwap(old, math.Float64bits(v)) {
			break
		}
	}
	for {
		old := p.max.Load()
		if !(v > math.Float64frombits(old)) || p.max.CompareAndSwap(old, math.Float64bits(v)) {
			break
		}
	}
}
