// Package telemetry sets up svc-sidecar's traces, metrics and logs: those
// of package engine/telemetry, which a program embedding the engine
// shares, and the metrics endpoint only the daemon serves.
//
// Setup builds engine/telemetry's providers with one more metric reader,
// a Prometheus exporter on a private registry that also holds the Go
// runtime and process collectors; MetricsHandler serves it in the
// Prometheus text format. The other names of this package are
// engine/telemetry's, so that the sidecar's packages set up and read
// telemetry through one import.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/svc-dev/svc/engine/telemetry"
)

// Telemetry holds the providers built by Setup and the Prometheus
// registry behind MetricsHandler. Its methods are safe for concurrent
// use.
type Telemetry struct {
	*telemetry.Telemetry
	registry *prometheus.Registry
	handler  http.Handler
}

// Setup builds the tracer and meter providers described by opts, their
// metrics also read by the Prometheus exporter of MetricsHandler (which
// takes the place of opts.MetricReader). On error nothing is left
// running.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	registry := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := registry.Register(c); err != nil {
			return nil, fmt.Errorf("telemetry: prometheus collector: %w", err)
		}
	}
	opts.MetricReader = func(hist sdkmetric.Producer) (sdkmetric.Reader, error) {
		promOpts := []otelprom.Option{otelprom.WithRegisterer(registry)}
		if hist != nil {
			promOpts = append(promOpts, otelprom.WithProducer(hist))
		}
		r, err := otelprom.New(promOpts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
		}
		return r, nil
	}
	t, err := telemetry.Setup(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Telemetry{
		Telemetry: t,
		registry:  registry,
		handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{
			Registry:      registry,
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      promLogger{opts.Logger},
		}),
	}, nil
}

// MetricsHandler serves the metrics in the Prometheus exposition format,
// Go runtime and process metrics included.
func (t *Telemetry) MetricsHandler() http.Handler { return t.handler }

// Registerer is the private Prometheus registry behind MetricsHandler, for
// collectors that are not OpenTelemetry instruments.
func (t *Telemetry) Registerer() prometheus.Registerer { return t.registry }

// promLogger adapts slog to promhttp's error log.
type promLogger struct{ log *slog.Logger }

func (p promLogger) Println(v ...any) {
	p.log.Warn("metrics scrape error", "error", fmt.Sprint(v...))
}
