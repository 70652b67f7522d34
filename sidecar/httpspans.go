package sidecar

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/envoy"
)

// httpScopeName is the instrumentation scope of the HTTP server spans.
const httpScopeName = "github.com/svc-dev/svc/sidecar"

// traceDecisions gives every decision request of the HTTP listener a
// server span, the parent of the engine's auth.verify_token and
// policy.evaluate spans, as the grpcstats handler's span is on the gRPC
// listener. The span continues the caller's trace when the request
// carries a W3C traceparent (nginx, Caddy, an SDK). Its name is the
// method and route, e.g. "POST /v1/authorize" or "GET /check".
//
// Only decision paths get one: the local API's authorize and
// validate-token, and the check mode's /check and /check/envoy/…. Probes,
// metrics scrapes, admin calls and the long-lived streams do not, so
// trace tail shows decisions and nothing else.
//
// While no span can be recorded (no OTLP endpoint and nobody tailing
// traces, the default) no span is started at all: the request only
// takes the caller's trace context, so that the decision's logs and
// audit record still name the caller's trace. Otherwise the sampler
// decides; a request whose span it drops costs the SDK's non-recording
// span, which carries the decision to drop to the engine's spans, and
// nothing else: its attributes (those contrib's otelhttp v0.72 gave the
// span, and http.route) are built only for a recording span. The span
// has no metrics of its own: the engine's decision metrics count these
// requests, and HTTP metrics that existed only while somebody watched
// would mislead.
func (s *Server) traceDecisions(next http.Handler) http.Handler {
	t := s.deps.Telemetry
	if t == nil {
		return next
	}
	sp := newDecisionSpans(t.TracerProvider())
	prop := t.Propagator()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isDecisionRequest(r) {
			next.ServeHTTP(w, r)
			return
		}
		ctx := r.Context()
		ext := prop.Extract(ctx, headerCarrier(r.Header))
		if !t.SpansRecorded() {
			if ext != ctx {
				r = r.WithContext(ext)
			}
			next.ServeHTTP(w, r)
			return
		}
		sp.serve(ext, w, r, next)
	})
}

// decisionSpans starts the server spans of decision requests.
type decisionSpans struct {
	tracer trace.Tracer
	// start holds the span start options, made once.
	start []trace.SpanStartOption
}

func newDecisionSpans(tp trace.TracerProvider) *decisionSpans {
	return &decisionSpans{
		tracer: tp.Tracer(httpScopeName),
		start:  []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)},
	}
}

// serve serves r with next under a server span started in ctx, the
// request's context with the caller's trace context.
func (d *decisionSpans) serve(ctx context.Context, w http.ResponseWriter, r *http.Request, next http.Handler) {
	// The route is known once the mux has matched the request: until
	// then the span is named by the method alone, as otelhttp named it.
	ctx, span := d.tracer.Start(ctx, spanMethod(r.Method), d.start...)
	r = r.WithContext(ctx)
	if !span.IsRecording() {
		next.ServeHTTP(w, r)
		return
	}
	span.SetAttributes(requestAttrs(r)...)
	// One allocation holds the writer, the body's counter and the
	// response's attributes.
	rw := &spanWriter{ResponseWriter: w}
	if r.Body != nil && r.Body != http.NoBody {
		rw.body.ReadCloser = r.Body
		r.Body = &rw.body
	}
	defer span.End()
	next.ServeHTTP(rw, r)
	endSpan(span, r.Method, r.Pattern, rw.body.n, rw.n, rw.status, rw.attrs[:0])
}

// endSpan sets the attributes of a request's span known once it is
// answered: the route of the mux pattern it matched, the bodies' sizes
// and the status (0: the handler wrote nothing, which net/http answers
// with 200). attrs is room for them.
func endSpan(span trace.Span, method, pattern string, reqBody, respBody int64, status int, attrs []attribute.KeyValue) {
	if status == 0 {
		status = http.StatusOK
	}
	if route := httpRoute(pattern); route != "" {
		span.SetName(routeSpanName(method, pattern, route))
		attrs = append(attrs, semconv.HTTPRoute(route))
	}
	if reqBody > 0 {
		attrs = append(attrs, semconv.HTTPRequestBodySize(int(reqBody)))
	}
	if respBody > 0 {
		attrs = append(attrs, semconv.HTTPResponseBodySize(int(respBody)))
	}
	attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
	span.SetAttributes(attrs...)
	switch {
	case status < 100 || status >= 600:
		span.SetStatus(codes.Error, fmt.Sprintf("Invalid HTTP status code %d", status))
	case status >= 500:
		span.SetStatus(codes.Error, "")
	}
}

// routeSpanName is the span name of a request of method that the mux
// matched to pattern, whose route is route: "METHOD route". It is the
// pattern itself when that names the method and no host, as the
// sidecar's decision patterns do ("GET /check").
func routeSpanName(method, pattern, route string) string {
	m := spanMethod(method)
	if len(pattern) == len(m)+1+len(route) && strings.HasPrefix(pattern, m) &&
		pattern[len(m)] == ' ' && strings.HasSuffix(pattern, route) {
		return pattern
	}
	return m + " " + route
}

// spanMethod is the method as a span name has it: "HTTP" for a method
// HTTP does not define.
func spanMethod(m string) string {
	if _, ok := methodAttr(m); ok {
		return m
	}
	if _, ok := methodAttr(strings.ToUpper(m)); ok {
		return strings.ToUpper(m)
	}
	return "HTTP"
}

// methodAttrs are http.request.method of the methods HTTP defines.
var methodAttrs = map[string]attribute.KeyValue{
	http.MethodGet: semconv.HTTPRequestMethodGet, http.MethodPost: semconv.HTTPRequestMethodPost,
	http.MethodHead: semconv.HTTPRequestMethodHead, http.MethodPut: semconv.HTTPRequestMethodPut,
	http.MethodPatch: semconv.HTTPRequestMethodPatch, http.MethodDelete: semconv.HTTPRequestMethodDelete,
	http.MethodOptions: semconv.HTTPRequestMethodOptions, http.MethodConnect: semconv.HTTPRequestMethodConnect,
	http.MethodTrace: semconv.HTTPRequestMethodTrace,
}

// methodAttr is http.request.method of a method HTTP defines.
func methodAttr(m string) (attribute.KeyValue, bool) {
	a, ok := methodAttrs[m]
	return a, ok
}

// requestAttrs are the attributes of a request's server span, as
// otelhttp's RequestTraceAttrs (semantic conventions v1.43) made them
// with no server name set: server.address (and server.port unless the
// scheme's default) from the Host, http.request.method (and
// http.request.method_original for a method not in its canonical form),
// url.scheme, network.peer.address and network.peer.port,
// user_agent.original, client.address (the first X-Forwarded-For entry,
// else the peer), url.path and network.protocol.version.
func requestAttrs(r *http.Request) []attribute.KeyValue {
	p := ""
	if r.URL != nil {
		p = r.URL.Path
	}
	return spanAttrs(spanRequest{
		host: r.Host, method: r.Method, tls: r.TLS != nil, remote: r.RemoteAddr,
		userAgent: r.UserAgent(), forwardedFor: r.Header.Get("X-Forwarded-For"), path: p, proto: r.Proto,
	})
}

// spanRequest is what requestAttrs reads of a request.
type spanRequest struct {
	host, method, remote, userAgent, forwardedFor, path, proto string
	tls                                                        bool
}

// spanAttrs are requestAttrs of r.
func spanAttrs(r spanRequest) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, 12)
	host, port := splitHostPort(r.host)
	attrs = append(attrs, semconv.ServerAddress(host))
	if m, ok := methodAttr(r.method); ok {
		attrs = append(attrs, m)
	} else {
		m, ok := methodAttr(strings.ToUpper(r.method))
		if !ok {
			m = semconv.HTTPRequestMethodOther
		}
		attrs = append(attrs, m)
		if r.method != "" {
			attrs = append(attrs, semconv.HTTPRequestMethodOriginal(r.method))
		}
	}
	if r.tls {
		attrs = append(attrs, semconv.URLScheme("https"))
	} else {
		attrs = append(attrs, semconv.URLScheme("http"))
	}
	if port > 0 && (r.tls && port != 443 || !r.tls && port != 80) {
		attrs = append(attrs, semconv.ServerPort(port))
	}
	peer, peerPort := splitHostPort(r.remote)
	if peer != "" {
		attrs = append(attrs, semconv.NetworkPeerAddress(peer))
		if peerPort > 0 {
			attrs = append(attrs, semconv.NetworkPeerPort(peerPort))
		}
	}
	if r.userAgent != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(r.userAgent))
	}
	client, _, _ := strings.Cut(r.forwardedFor, ",")
	if client == "" {
		client = peer
	}
	if client != "" {
		attrs = append(attrs, semconv.ClientAddress(client))
	}
	if r.path != "" {
		attrs = append(attrs, semconv.URLPath(r.path))
	}
	name, version, _ := strings.Cut(r.proto, "/")
	if name = strings.ToLower(name); name != "" && name != "http" {
		attrs = append(attrs, semconv.NetworkProtocolName(name))
	}
	if version != "" {
		attrs = append(attrs, semconv.NetworkProtocolVersion(version))
	}
	return attrs
}

// splitHostPort splits "host", "host:port", "[host]" or "[host]:port"
// into the host and the port, -1 when there is none or it does not
// parse; the host is empty when the address does not parse.
func splitHostPort(hostport string) (string, int) {
	if strings.HasPrefix(hostport, "[") {
		end := strings.LastIndexByte(hostport, ']')
		if end < 0 {
			return "", -1
		}
		if !strings.Contains(hostport[end:], ":") {
			return hostport[1:end], -1
		}
	} else if !strings.Contains(hostport, ":") {
		return hostport, -1
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return host, -1
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return host, -1
	}
	return host, int(port)
}

// httpRoute is the route of a ServeMux pattern: its path, without the
// method and host.
func httpRoute(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return ""
}

// spanWriter is the ResponseWriter of a request whose span records: it
// keeps the status and counts the body's bytes. It also holds the
// request body's counter and room for the response's attributes.
type spanWriter struct {
	http.ResponseWriter
	status int
	n      int64
	body   spanBody
	attrs  [4]attribute.KeyValue
}

func (w *spanWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *spanWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// Flush flushes the response when the underlying writer can.
func (w *spanWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *spanWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// spanBody counts the bytes read from a request's body.
type spanBody struct {
	io.ReadCloser
	n int64
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// isDecisionRequest reports a request of a path that reaches a decision.
func isDecisionRequest(r *http.Request) bool {
	switch p := r.URL.Path; p {
	case authz.PathAuthorize, authz.PathValidateToken, authz.PathPlanResources, envoy.CheckPath:
		return true
	default:
		return strings.HasPrefix(p, envoy.EnvoyCheckPrefix+"/")
	}
}

// headerCarrier is propagation.HeaderCarrier, but finds the W3C fields
// (traceparent, tracestate, baggage) by their canonical keys without
// computing them: http.Header.Get canonicalizes the lower-case field
// names propagators use, allocating on every request that is not traced.
type headerCarrier http.Header

var _ propagation.ValuesGetter = headerCarrier{}

// canonicalField is textproto.CanonicalMIMEHeaderKey(field).
func canonicalField(field string) string {
	switch field {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "baggage":
		return "Baggage"
	}
	return textproto.CanonicalMIMEHeaderKey(field)
}

// Get returns the first value of field, as http.Header.Get.
func (c headerCarrier) Get(field string) string {
	if vs := c[canonicalField(field)]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// Values returns every value of field, as http.Header.Values.
func (c headerCarrier) Values(field string) []string { return c[canonicalField(field)] }

// Set sets field, as http.Header.Set.
func (c headerCarrier) Set(field, value string) { propagation.HeaderCarrier(c).Set(field, value) }

// Keys lists the keys of the header, as propagation.HeaderCarrier.Keys.
func (c headerCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }

// frontHandler is what traceDecisions and countInflight make of a check
// request the HTTP/1.1 front answers itself (front): the caller's trace
// context, and a server span while spans are recorded, around serve.
func (s *Server) frontHandler(serve func(context.Context, http.ResponseWriter, *envoy.FrontRequest)) func(context.Context, http.ResponseWriter, *envoy.FrontRequest, *frontConn) {
	t := s.deps.Telemetry
	if t == nil {
		return func(ctx context.Context, w http.ResponseWriter, r *envoy.FrontRequest, _ *frontConn) {
			serve(ctx, w, r)
		}
	}
	sp := newDecisionSpans(t.TracerProvider())
	prop := t.Propagator()
	return func(ctx context.Context, w http.ResponseWriter, r *envoy.FrontRequest, fc *frontConn) {
		ctx = prop.Extract(ctx, frontCarrier{r})
		if !t.SpansRecorded() {
			serve(ctx, w, r)
			return
		}
		ctx, span := sp.tracer.Start(ctx, spanMethod(r.Method), sp.start...)
		if !span.IsRecording() {
			serve(ctx, w, r)
			return
		}
		defer span.End()
		userAgent, _ := r.First("user-agent") // as http.Request.UserAgent
		span.SetAttributes(spanAttrs(spanRequest{
			host: r.Host, method: r.Method, remote: r.RemoteAddr, userAgent: userAgent,
			forwardedFor: r.Header("x-forwarded-for"), path: r.Path, proto: "HTTP/1.1",
		})...)
		serve(ctx, w, r)
		var attrs [4]attribute.KeyValue
		endSpan(span, r.Method, r.Pattern(), 0, int64(len(fc.w.body)), fc.w.status, attrs[:0])
	}
}

// frontCarrier finds the W3C trace fields of a front request as
// headerCarrier finds them in net/http's: Get the first value (of
// traceparent and tracestate alike), Values every baggage value, each
// parsed apart, so that a malformed one loses only its own entries.
type frontCarrier struct{ r *envoy.FrontRequest }

var _ propagation.ValuesGetter = frontCarrier{}

// Get returns the first value of field, as http.Header.Get.
func (c frontCarrier) Get(field string) string {
	switch field = strings.ToLower(field); field {
	case "baggage":
		if b := c.r.Baggage(); len(b) > 0 {
			return b[0]
		}
		return ""
	case "traceparent", "tracestate":
		v, _ := c.r.First(field)
		return v
	}
	// No other field is read by the propagators the sidecar sets.
	return c.r.Header(field)
}

// Values returns every value of field, as http.Header.Values, for
// baggage; Get's value for the other fields.
func (c frontCarrier) Values(field string) []string {
	if strings.EqualFold(field, "baggage") {
		return c.r.Baggage()
	}
	if v := c.Get(field); v != "" {
		return []string{v}
	}
	return nil
}

// Set does nothing: a request's carrier is only read.
func (frontCarrier) Set(string, string) {}

// Keys lists none: propagators read the fields by name.
func (frontCarrier) Keys() []string { return nil }
