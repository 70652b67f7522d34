// Package telemetry sets up the traces, metrics and logs of a program
// that runs the engine: svc-sidecar (through sidecar/telemetry, which adds
// the Prometheus endpoint) and the Rust crate's C ABI.
//
// Setup builds an OpenTelemetry TracerProvider and MeterProvider for one
// process: spans go to an OTLP/gRPC collector when an endpoint is
// configured and always to an in-process SpanFeed; metrics are pushed
// over OTLP/gRPC with an endpoint, and read by Options.MetricReader when
// one is given. Nothing is installed globally unless InstallGlobal is
// called. It links no Prometheus library, so a program without a metrics
// endpoint carries none.
//
// NewLogger builds the JSON slog logger whose Handler redacts secrets,
// stamps records with the trace and span ids of their context and keeps
// the recent records in a LogFeed. The feeds are what trace and log
// tailing stream from.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/internal/otelhist"
	"github.com/svc-dev/svc/internal/otelhist/sdkexport"
)

// DefaultServiceName is the service.name used when Options leaves it empty.
const DefaultServiceName = "svc-sidecar"

// Options configures Setup.
type Options struct {
	// ServiceName becomes the resource's service.name. Default
	// DefaultServiceName.
	ServiceName string
	// ServiceVersion becomes the resource's service.version.
	ServiceVersion string
	// OTLPEndpoint is the OTLP/gRPC collector for traces and metrics:
	// "host:port", "http://host:port" (plaintext) or "https://host:port"
	// (TLS); a URL without a port means 4317. Empty means no OTLP export.
	// Usually OTEL_EXPORTER_OTLP_ENDPOINT (see ApplyEnv).
	OTLPEndpoint string
	// TracesEndpoint overrides OTLPEndpoint for traces.
	TracesEndpoint string
	// MetricsEndpoint overrides OTLPEndpoint for metrics.
	MetricsEndpoint string
	// Insecure selects plaintext for an endpoint given as host:port, which
	// otherwise uses TLS. A URL's scheme decides on its own.
	Insecure bool
	// SpanFeedSize is how many finished spans the SpanFeed keeps. Default
	// DefaultFeedSize.
	SpanFeedSize int
	// MetricInterval is the OTLP metric push interval. Default the SDK's
	// (60s, or OTEL_METRIC_EXPORT_INTERVAL).
	MetricInterval time.Duration
	// Logger reports setup and export problems. When it was made by
	// NewLogger, its LogFeed is also available from Telemetry.Logs.
	// Default slog.Default().
	Logger *slog.Logger
	// MetricReader, when set, builds a further reader of the metrics (the
	// sidecar's Prometheus exporter). hist produces the histograms
	// recorded outside the SDK, which the reader must collect too; it is
	// nil when there are none.
	MetricReader func(hist sdkmetric.Producer) (sdkmetric.Reader, error)
}

// Telemetry holds the providers built by Setup. Its methods are safe for
// concurrent use.
type Telemetry struct {
	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider
	// meters is mp as components get it, with the histograms its readers
	// also collect (meterProvider).
	meters metric.MeterProvider
	spans  *SpanFeed
	log    *slog.Logger
	// exporting is set when spans go to an OTLP endpoint.
	exporting bool

	shutdownOnce sync.Once
	shutdownErr  error
}

// Setup builds the tracer and meter providers described by opts. On error
// nothing is left running.
func Setup(ctx context.Context, opts Options) (*Telemetry, error) {
	if opts.ServiceName == "" {
		opts.ServiceName = DefaultServiceName
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	traceEP := firstNonEmpty(opts.TracesEndpoint, opts.OTLPEndpoint)
	metricEP := firstNonEmpty(opts.MetricsEndpoint, opts.OTLPEndpoint)
	var traceTarget, metricTarget target
	var err error
	if traceEP != "" {
		if traceTarget, err = parseEndpoint(traceEP, opts.Insecure); err != nil {
			return nil, err
		}
	}
	if metricEP != "" {
		if metricTarget, err = parseEndpoint(metricEP, opts.Insecure); err != nil {
			return nil, err
		}
	}

	res, err := resource.New(ctx,
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithSchemaURL(semconv.SchemaURL),
		resource.WithAttributes(semconv.ServiceName(opts.ServiceName), semconv.ServiceVersion(opts.ServiceVersion)),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}

	t := &Telemetry{spans: NewSpanFeed(opts.SpanFeedSize), log: opts.Logger, exporting: traceEP != ""}
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithSpanProcessor(t.spans)}
	if traceEP == "" {
		// Without an exporter, spans are recorded only for a live tail.
		// With one, the SDK's sampler applies (OTEL_TRACES_SAMPLER,
		// default parentbased_always_on).
		tpOpts = append(tpOpts, sdktrace.WithSampler(watchedSampler{feed: t.spans}))
	}
	if traceEP != "" {
		exp, err := otlptracegrpc.New(ctx, traceTarget.traceOptions()...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: otlp trace exporter: %w", err)
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(exp))
	}
	t.tp = sdktrace.NewTracerProvider(tpOpts...)

	if err := t.setupMetrics(ctx, res, metricEP, metricTarget, opts); err != nil {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return nil, errors.Join(err, t.tp.Shutdown(shutdownCtx))
	}
	opts.Logger.Info("telemetry ready", "service_name", opts.ServiceName,
		"otlp_traces", traceTarget.hostport, "otlp_metrics", metricTarget.hostport)
	return t, nil
}

func (t *Telemetry) setupMetrics(ctx context.Context, res *resource.Resource, ep string, tg target, opts Options) error {
	// The histograms recorded on every request go to hist when every
	// reader takes them as it produces them: the sidecar's Prometheus
	// exporter always (cumulative, explicit buckets), OTLP unless
	// configured otherwise.
	var exp sdkmetric.Exporter
	if ep != "" {
		var err error
		if exp, err = otlpmetricgrpc.New(ctx, tg.metricOptions()...); err != nil {
			return fmt.Errorf("telemetry: otlp metric exporter: %w", err)
		}
	}
	var hist *otelhist.Registry
	if exp == nil || histogramsFit(exp) {
		hist = otelhist.NewRegistry(otelhist.OptionsFromEnv())
	}
	mpOpts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	if opts.MetricReader != nil {
		var p sdkmetric.Producer
		if hist != nil {
			p = sdkexport.Producer(hist)
		}
		r, err := opts.MetricReader(p)
		if err != nil {
			return err
		}
		mpOpts = append(mpOpts, sdkmetric.WithReader(r))
	}
	if exp != nil {
		var readerOpts []sdkmetric.PeriodicReaderOption
		if opts.MetricInterval > 0 {
			readerOpts = append(readerOpts, sdkmetric.WithInterval(opts.MetricInterval))
		}
		if hist != nil {
			readerOpts = append(readerOpts, sdkmetric.WithProducer(sdkexport.Producer(hist)))
			exp = scopeMerger{exp}
		}
		mpOpts = append(mpOpts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, readerOpts...)))
	}
	t.mp = sdkmetric.NewMeterProvider(mpOpts...)
	t.meters = meters(t.mp, hist)
	return nil
}

// TracerProvider returns the provider every component takes its tracer from.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// MeterProvider returns the provider every component takes its meter
// from. It implements otelhist.Provider: components record the
// histograms of every request in its otelhist.Registry, which its
// readers export as they export the SDK's.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.meters }

// SpansRecorded reports whether a span started now may be recorded: spans
// go to an OTLP endpoint, or somebody watches the span feed. When it is
// false every span is dropped unrecorded, and a caller may skip the work
// of describing one.
func (t *Telemetry) SpansRecorded() bool { return t.exporting || t.spans.Watched() }

// Exporting reports whether spans go to an OTLP endpoint. Without one,
// only a watcher of Spans ever sees a span.
func (t *Telemetry) Exporting() bool { return t.exporting }

// Spans returns the in-process feed of finished spans.
func (t *Telemetry) Spans() *SpanFeed { return t.spans }

// Logs returns the LogFeed of Options.Logger, or nil when that logger was
// not made by NewLogger.
func (t *Telemetry) Logs() *LogFeed { return LogFeedOf(t.log) }

// Propagator returns the W3C trace-context and baggage propagator, for
// instrumentation that extracts and injects trace headers.
func (t *Telemetry) Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// InstallGlobal makes t's providers and propagator the OpenTelemetry
// globals and routes OpenTelemetry's internal errors (failed exports) to
// the logger, for libraries that only use the globals.
func (t *Telemetry) InstallGlobal() {
	otel.SetTracerProvider(t.tp)
	otel.SetMeterProvider(t.mp)
	otel.SetTextMapPropagator(t.Propagator())
	log := t.log
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("telemetry export failed", "error", err)
	}))
}

// Shutdown ends span and metric export: pending spans and a last metric
// collection are pushed to the collector, bounded by ctx, and span feed
// subscriptions end. Later calls return the first call's result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.shutdownOnce.Do(func() {
		var errs []error
		if err := t.tp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("telemetry: tracer provider shutdown: %w", err))
		}
		if err := t.mp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("telemetry: meter provider shutdown: %w", err))
		}
		t.shutdownErr = errors.Join(errs...)
	})
	return t.shutdownErr
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
