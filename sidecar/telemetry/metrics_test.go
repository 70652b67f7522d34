package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/svc-dev/svc/internal/otelhist"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

// TestMetricsHandler: /metrics serves, in the Prometheus text format, an
// SDK counter, a histogram recorded outside the SDK (otelhist) as the
// exporter serves the SDK's, the Go runtime and process collectors, and
// the resource's service name.
func TestMetricsHandler(t *testing.T) {
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{
		ServiceName: "svc-test", Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })

	counter, err := tel.MeterProvider().Meter("telemetry-test").Int64Counter("svc.test.requests")
	if err != nil {
		t.Fatal(err)
	}
	counter.Add(context.Background(), 3, metric.WithAttributes(attribute.String("tenant", "acme")))
	reg := otelhist.From(tel.MeterProvider())
	if reg == nil {
		t.Fatal("the meter provider offers no otelhist.Registry")
	}
	s := reg.Histogram(otelhist.Scope{Name: "telemetry-test"}, "svc.test.duration", "Test durations.", "s", []float64{0.001, 0.01}).
		Bind(attribute.NewSet(attribute.String("k", "v")))
	for _, v := range []float64{0.0005, 0.005, 0.05, 0.005} {
		s.Record(context.Background(), v)
	}

	srv := httptest.NewServer(tel.MetricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`svc_test_requests_total{otel_scope_name="telemetry-test",otel_scope_schema_url="",otel_scope_version="",tenant="acme"} 3`,
		"# TYPE svc_test_duration_seconds histogram",
		`svc_test_duration_seconds_bucket{k="v",otel_scope_name="telemetry-test",otel_scope_schema_url="",otel_scope_version="",le="0.01"} 3`,
		`svc_test_duration_seconds_count{k="v",otel_scope_name="telemetry-test",otel_scope_schema_url="",otel_scope_version=""} 4`,
		"go_goroutines ", "process_cpu_seconds_total ", `service_name="svc-test"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q:\n%s", want, body)
		}
	}
	if tel.Registerer() == nil || tel.Spans() == nil {
		t.Error("no registerer or span feed")
	}
}
