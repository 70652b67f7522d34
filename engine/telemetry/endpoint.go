package telemetry

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"google.golang.org/grpc"
)

// defaultOTLPPort is the OTLP/gRPC port, used when an endpoint URL has none.
const defaultOTLPPort = "4317"

// Environment variables read by ApplyEnv; the OTLP exporters read the rest
// of the OTEL_EXPORTER_OTLP_* family (headers, timeout, compression,
// certificates) themselves.
const (
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvMetricsEndpoint = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	EnvInsecure        = "OTEL_EXPORTER_OTLP_INSECURE"
	EnvSDKDisabled     = "OTEL_SDK_DISABLED"
)

// ApplyEnv fills the export settings from the standard OpenTelemetry
// environment variables, read through getenv (os.Getenv in production):
// the endpoints when they are still empty, Insecure from
// OTEL_EXPORTER_OTLP_INSECURE, and OTEL_SDK_DISABLED=true turns OTLP export
// off (the in-process feeds and Prometheus metrics stay).
func (o *Options) ApplyEnv(getenv func(string) string) error {
	fill := func(dst *string, name string) {
		if *dst == "" {
			*dst = strings.TrimSpace(getenv(name))
		}
	}
	fill(&o.OTLPEndpoint, EnvEndpoint)
	fill(&o.TracesEndpoint, EnvTracesEndpoint)
	fill(&o.MetricsEndpoint, EnvMetricsEndpoint)
	if v := strings.TrimSpace(getenv(EnvInsecure)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("telemetry: %s must be true or false, got %q", EnvInsecure, v)
		}
		o.Insecure = o.Insecure || b
	}
	if v := strings.TrimSpace(getenv(EnvSDKDisabled)); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("telemetry: %s must be true or false, got %q", EnvSDKDisabled, v)
		}
		if b {
			o.OTLPEndpoint, o.TracesEndpoint, o.MetricsEndpoint = "", "", ""
		}
	}
	return nil
}

// target is a parsed OTLP/gRPC endpoint.
type target struct {
	// url is set for an endpoint given with a scheme: http means
	// plaintext, https means TLS, whatever Insecure says.
	url string
	// hostport is the dial target; for an endpoint without a scheme it is
	// the whole of it, and TLS is used unless insecure.
	hostport string
	insecure bool
}

// parseEndpoint accepts "host:port", "http://host[:port]" and
// "https://host[:port]"; a path in a URL is ignored, as OTLP/gRPC has none.
func parseEndpoint(raw string, insecure bool) (target, error) {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		if strings.Contains(raw, "@") {
			// Never echo what may be credentials.
			return target{}, errors.New("telemetry: otlp endpoint without a scheme must not hold user information")
		}
		host, port, err := net.SplitHostPort(raw)
		if err != nil || host == "" {
			return target{}, fmt.Errorf("telemetry: otlp endpoint %q: want host:port or http(s)://host:port", raw)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return target{}, fmt.Errorf("telemetry: otlp endpoint %q: port must be a number", raw)
		}
		return target{hostport: raw, insecure: insecure}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("telemetry: otlp endpoint: %w", err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return target{}, fmt.Errorf("telemetry: otlp endpoint scheme %q: want http or https", u.Scheme)
	}
	if u.Hostname() == "" {
		return target{}, fmt.Errorf("telemetry: otlp endpoint %q has no host", u.Redacted())
	}
	port := u.Port()
	if port == "" {
		port = defaultOTLPPort
	} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return target{}, fmt.Errorf("telemetry: otlp endpoint %q: port must be a number", u.Redacted())
	}
	hostport := net.JoinHostPort(u.Hostname(), port)
	return target{url: scheme + "://" + hostport, hostport: hostport, insecure: scheme == "http"}, nil
}

// traceOptions are the trace exporter's options for t.
//
// The exporter's limit on an export request's size (64 MiB) is gRPC's
// limit on the message it sends: the exporter enforces its own by
// computing the size of every request before gRPC's codec computes it
// again to marshal it, a second walk of every span's attributes that cost
// a sixth of exporting, and gRPC refuses a larger message as well, once
// marshalled.
func (t target) traceOptions() []otlptracegrpc.Option {
	opts := []otlptracegrpc.Option{
		otlptracegrpc.WithMaxRequestSize(0),
		otlptracegrpc.WithDialOption(grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(maxTraceRequest))),
	}
	if t.url != "" {
		return append(opts, otlptracegrpc.WithEndpointURL(t.url))
	}
	opts = append(opts, otlptracegrpc.WithEndpoint(t.hostport))
	if t.insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	return opts
}

// maxTraceRequest is the largest trace export request sent, in bytes: the
// exporter's default limit.
var maxTraceRequest = 64 << 20

func (t target) metricOptions() []otlpmetricgrpc.Option {
	if t.url != "" {
		return []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpointURL(t.url)}
	}
	opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpoint(t.hostport)}
	if t.insecure {
		opts = append(opts, otlpmetricgrpc.WithInsecure())
	}
	return opts
}
