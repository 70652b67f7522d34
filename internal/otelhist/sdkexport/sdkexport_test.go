package sdkexport_test

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/svc-dev/svc/internal/otelhist"
	"github.com/svc-dev/svc/internal/otelhist/sdkexport"
	"github.com/svc-dev/svc/internal/testkit/histtest"
)

// The histogram of the tests, under short names.
var bounds, scope = histtest.Bounds(), histtest.Scope

const name, desc, unit = histtest.Name, histtest.Desc, histtest.Unit

// pair records the same measurements with the SDK's histogram and with a
// Registry, each on a provider of its own with a manual reader and a
// Prometheus exporter.
type pair struct {
	sdkReader, ourReader *sdkmetric.ManualReader
	sdkProm, ourProm     *prometheus.Registry
	sdkHist              metric.Float64Histogram
	reg                  *otelhist.Registry
	hist                 *otelhist.Histogram
}

func newPair(t *testing.T, opts otelhist.Options) *pair {
	t.Helper()
	res := resource.NewSchemaless(attribute.String("service.name", "svc-test"))
	p := &pair{reg: otelhist.NewRegistry(opts)}
	p.sdkReader = sdkmetric.NewManualReader()
	p.ourReader = sdkmetric.NewManualReader(sdkmetric.WithProducer(sdkexport.Producer(p.reg)))
	p.sdkProm, p.ourProm = prometheus.NewRegistry(), prometheus.NewRegistry()
	sdkExp, err := otelprom.New(otelprom.WithRegisterer(p.sdkProm))
	if err != nil {
		t.Fatal(err)
	}
	ourExp, err := otelprom.New(otelprom.WithRegisterer(p.ourProm), otelprom.WithProducer(sdkexport.Producer(p.reg)))
	if err != nil {
		t.Fatal(err)
	}
	filter := exemplar.TraceBasedFilter
	if opts.Filter != nil {
		filter = exemplar.Filter(opts.Filter)
	}
	sdkOpts := []sdkmetric.Option{
		sdkmetric.WithResource(res), sdkmetric.WithReader(p.sdkReader), sdkmetric.WithReader(sdkExp),
		sdkmetric.WithExemplarFilter(filter),
	}
	if opts.CardinalityLimit != 0 {
		sdkOpts = append(sdkOpts, sdkmetric.WithCardinalityLimit(opts.CardinalityLimit))
	}
	sdkMP := sdkmetric.NewMeterProvider(sdkOpts...)
	ourMP := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(p.ourReader), sdkmetric.WithReader(ourExp))
	t.Cleanup(func() {
		_ = sdkMP.Shutdown(context.Background())
		_ = ourMP.Shutdown(context.Background())
	})
	m := sdkMP.Meter(scope.Name, metric.WithInstrumentationVersion(scope.Version), metric.WithSchemaURL(scope.SchemaURL))
	if p.sdkHist, err = m.Float64Histogram(name, metric.WithDescription(desc), metric.WithUnit(unit),
		metric.WithExplicitBucketBoundaries(bounds...)); err != nil {
		t.Fatal(err)
	}
	p.hist = p.reg.Histogram(scope, name, desc, unit, bounds)
	return p
}

func (p *pair) record(ctx context.Context, v float64, attrs attribute.Set) {
	p.sdkHist.Record(ctx, v, metric.WithAttributeSet(attrs))
	p.hist.Bind(attrs).Record(ctx, v)
}

// compare collects both sides and requires the same data and the same
// Prometheus exposition.
func (p *pair) compare(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var want, got metricdata.ResourceMetrics
	if err := p.sdkReader.Collect(ctx, &want); err != nil {
		t.Fatal(err)
	}
	if err := p.ourReader.Collect(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if len(want.ScopeMetrics) != len(got.ScopeMetrics) {
		t.Fatalf("scopes: got %d, want %d", len(got.ScopeMetrics), len(want.ScopeMetrics))
	}
	sortPoints(want)
	sortPoints(got)
	alignSums(t, want, got)
	metricdatatest.AssertEqual(t, want, got, metricdatatest.IgnoreTimestamp())
	for _, sm := range got.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				if dp.StartTime.IsZero() || dp.Time.Before(dp.StartTime) {
					t.Errorf("data point times: start %v, time %v", dp.StartTime, dp.Time)
				}
				for _, e := range dp.Exemplars {
					if e.Time.Before(dp.StartTime) || e.Time.After(dp.Time) {
						t.Errorf("exemplar time %v outside [%v, %v]", e.Time, dp.StartTime, dp.Time)
					}
				}
			}
		}
	}
	if w, g := exposition(t, p.sdkProm), exposition(t, p.ourProm); w != g {
		wl, gl := strings.Split(w, "\n"), strings.Split(g, "\n")
		for i := range max(len(wl), len(gl)) {
			if i >= len(wl) || i >= len(gl) || wl[i] != gl[i] {
				t.Errorf("Prometheus exposition differs at line %d:\nSDK:  %s\nours: %s", i+1, at(wl, i), at(gl, i))
				break
			}
		}
	}
}

// alignSums requires the sums of got to be those of want to 12
// significant digits, then copies them: the SDK adds what it collected
// back into the sum it keeps, so its last digits depend on when it was
// collected (and differ between two readers of one provider).
func alignSums(t *testing.T, want, got metricdata.ResourceMetrics) {
	t.Helper()
	for i, sm := range got.ScopeMetrics {
		for j, m := range sm.Metrics {
			if i >= len(want.ScopeMetrics) || j >= len(want.ScopeMetrics[i].Metrics) {
				return
			}
			w, ok := want.ScopeMetrics[i].Metrics[j].Data.(metricdata.Histogram[float64])
			if !ok {
				return
			}
			for k := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				if k >= len(w.DataPoints) {
					return
				}
				g := &m.Data.(metricdata.Histogram[float64]).DataPoints[k]
				if !close12(g.Sum, w.DataPoints[k].Sum) {
					t.Errorf("%s: sum %v, want %v", g.Attributes.Encoded(attribute.DefaultEncoder()), g.Sum, w.DataPoints[k].Sum)
				}
				g.Sum = w.DataPoints[k].Sum
			}
		}
	}
}

func close12(a, b float64) bool {
	return math.Abs(a-b) <= 1e-12*math.Max(math.Abs(a), math.Abs(b))
}

// sortPoints orders the histograms' data points by attributes: the SDK's
// order is a map's.
func sortPoints(rm metricdata.ResourceMetrics) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h := m.Data.(metricdata.Histogram[float64])
			slices.SortFunc(h.DataPoints, func(a, b metricdata.HistogramDataPoint[float64]) int {
				enc := attribute.DefaultEncoder()
				return strings.Compare(a.Attributes.Encoded(enc), b.Attributes.Encoded(enc))
			})
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(end)"
}

// exposition is what /metrics serves from reg, exemplars included (they
// show in the OpenMetrics format), timestamps of exemplars left out.
func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				// See alignSums.
				s := strconv.FormatFloat(h.GetSampleSum(), 'g', 12, 64)
				v, _ := strconv.ParseFloat(s, 64)
				h.SampleSum = &v
			}
			for _, b := range m.GetHistogram().GetBucket() {
				if ex := b.GetExemplar(); ex != nil {
					// The exporter orders the labels as a map does.
					ex.Timestamp = nil
					slices.SortFunc(ex.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
				}
			}
		}
		if _, err := expfmt.MetricFamilyToOpenMetrics(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}

// values are varied measurements: on and around every bound, whole
// numbers, zero, negative, beyond the last bound, and random ones.
func values(r *rand.Rand, n int) []float64 {
	var vs []float64
	for _, b := range bounds {
		vs = append(vs, b, b*0.999, b*1.001)
	}
	vs = append(vs, 0, -1, 1, 2, 3, 0.06, 100, 1e9)
	for len(vs) < n {
		vs = append(vs, r.ExpFloat64()*0.001)
	}
	r.Shuffle(len(vs), func(i, j int) { vs[i], vs[j] = vs[j], vs[i] })
	return vs
}

func TestSameAsSDK(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := newPair(t, otelhist.Options{})
	sets := []attribute.Set{
		attribute.NewSet(attribute.String("result", "allow"), attribute.String("reason", "ok")),
		attribute.NewSet(attribute.String("result", "deny"), attribute.String("reason", "token_expired")),
		attribute.NewSet(),
	}
	// Nothing recorded: nothing exported on either side.
	p.compare(t)
	for round := range 3 {
		for i, v := range values(r, 500) {
			p.record(context.Background(), v, sets[i%len(sets)])
		}
		// One sampled measurement in a few buckets: the exemplar each
		// side must keep.
		for i, v := range []float64{0.00002, 0.0003, 0.02, 7} {
			p.record(histtest.Sampled(round*10+i), v, sets[(round+i)%len(sets)])
		}
		p.compare(t)
	}
	// Exemplars are kept across a collection without measurements.
	p.compare(t)
}

func TestSameAsSDKAlwaysOn(t *testing.T) {
	// Every measurement is offered; with one per bucket the choice is
	// the same on both sides, unsampled contexts give empty ids.
	p := newPair(t, otelhist.Options{Filter: otelhist.AlwaysOn})
	set := attribute.NewSet(attribute.String("k", "v"))
	p.record(context.Background(), 0.00003, set)
	p.record(histtest.Sampled(7), 0.003, set)
	p.compare(t)
}

func TestSameAsSDKOverflow(t *testing.T) {
	p := newPair(t, otelhist.Options{CardinalityLimit: 3})
	for i := range 6 {
		set := attribute.NewSet(attribute.Int("i", i))
		p.record(context.Background(), float64(i)*0.001, set)
		p.record(context.Background(), float64(i)*0.0001, set)
	}
	p.compare(t)
}
