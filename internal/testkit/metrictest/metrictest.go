// Package metrictest reads what OpenTelemetry instruments recorded, for
// tests: a manual reader's metrics by name, their points by attribute,
// and a Prometheus scrape of a metrics handler.
package metrictest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/svc-dev/svc/internal/testkit"
)

// Collect returns what reader holds now.
func Collect(t testing.TB, reader sdkmetric.Reader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// Metric returns the metric name that reader holds and the scope that
// recorded it; it fails t when there is none.
func Metric(t testing.TB, reader sdkmetric.Reader, name string) (instrumentation.Scope, metricdata.Metrics) {
	t.Helper()
	for _, sm := range Collect(t, reader).ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return sm.Scope, m
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return instrumentation.Scope{}, metricdata.Metrics{}
}

// Values returns the points of the metric name in rm, added up by the
// values of the attributes keys joined with "/" (an absent attribute is
// ""): an int64 sum's or gauge's values, a histogram's counts. A metric
// that rm does not hold gives an empty map.
func Values(rm metricdata.ResourceMetrics, name string, keys ...string) map[string]int64 {
	return ValuesBy(rm, name, func(set attribute.Set) string {
		vs := make([]string, len(keys))
		for i, k := range keys {
			if v, ok := set.Value(attribute.Key(k)); ok {
				vs[i] = v.String()
			}
		}
		return strings.Join(vs, "/")
	})
}

// ValuesBy is Values with the points keyed by key of their attributes.
func ValuesBy(rm metricdata.ResourceMetrics, name string, key func(attribute.Set) string) map[string]int64 {
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out[key(dp.Attributes)] += dp.Value
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					out[key(dp.Attributes)] += dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out[key(dp.Attributes)] += int64(dp.Count)
				}
			}
		}
	}
	return out
}

// Scrape GETs h as Prometheus would scrape it and returns the body; it
// fails t unless h answers 200.
func Scrape(t testing.TB, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, body := testkit.Get(t, nil, srv.URL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics handler: status %d\n%s", resp.StatusCode, body)
	}
	return string(body)
}
