package sidecar

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc/metadata"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

// startTelemetrySidecar serves a sidecar with telemetry and no exporter:
// spans are recorded only while the span feed is watched.
func startTelemetrySidecar(t *testing.T, idp *testIdP) (*running, *telemetry.Telemetry) {
	t.Helper()
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	eng, err := engine.New(testConfig(idp), engine.Deps{
		Logger: quietLogger(), TracerProvider: tel.TracerProvider(), MeterProvider: tel.MeterProvider(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	r := startServer(t, Deps{Engine: eng, Telemetry: tel})
	testkit.Eventually(t, "ready", r.isReady)
	return r, tel
}

// TestGRPCServerSpan: a recorded Check has the server span otelgrpc gave
// it, under the caller's span when the metadata carries a traceparent,
// with the decision's spans under it; the call's duration is exported
// under otelgrpc's metric name and attributes.
func TestGRPCServerSpan(t *testing.T) {
	idp := newTestIdP(t)
	r, tel := startTelemetrySidecar(t, idp)
	client := authv3.NewAuthorizationClient(dial(t, r.GRPCAddr()))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sub := tel.Spans().Watch(ctx, nil, time.Time{})

	const callerTrace, callerSpan = "5b8aa5a2d2c872e8321cf37308d69df2", "051581bf3cb55c13"
	callCtx := metadata.AppendToOutgoingContext(ctx, "traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	if _, err := client.Check(callCtx, checkRequest(idp.token(t, "alice", testTenant, "viewer"), http.MethodGet, "/orders/1")); err != nil {
		t.Fatal(err)
	}
	byName := map[string]telemetry.SpanRecord{}
	for len(byName) < 3 {
		select {
		case s := <-sub.C:
			byName[s.Name] = s
		case <-ctx.Done():
			t.Fatalf("spans so far: %v", byName)
		}
	}
	server, ok := byName["envoy.service.auth.v3.Authorization/Check"]
	if !ok {
		t.Fatalf("no server span: %v", byName)
	}
	if server.TraceID != callerTrace || server.ParentID != callerSpan || server.Kind != "server" || server.Status != "unset" {
		t.Errorf("server span %+v, want a server span under the caller's span %s of trace %s", server, callerSpan, callerTrace)
	}
	for k, want := range map[string]string{
		"rpc.method": "envoy.service.auth.v3.Authorization/Check", "rpc.system.name": "grpc",
		"rpc.response.status_code": "OK", "server.address": "127.0.0.1",
	} {
		if got := server.Attributes[k]; got != want {
			t.Errorf("server span %s = %q, want %q", k, got, want)
		}
	}
	if server.Attributes["server.port"] == "" {
		t.Error("server span lacks server.port")
	}
	for _, name := range []string{engine.SpanVerifyToken, engine.SpanEvaluate} {
		if s := byName[name]; s.TraceID != callerTrace || s.ParentID != server.SpanID {
			t.Errorf("%s is not a child of the server span: %+v", name, s)
		}
	}

	waitMetric(t, r, `(?m)^rpc_server_call_duration_seconds_count\{[^}]*rpc_method="envoy.service.auth.v3.Authorization/Check",rpc_response_status_code="OK",rpc_system_name="grpc"\} 1$`)
}

// TestGRPCUnsampledNoSpan: while nothing records spans, a Check leaves no
// span, and its duration is still counted.
func TestGRPCUnsampledNoSpan(t *testing.T) {
	idp := newTestIdP(t)
	r, tel := startTelemetrySidecar(t, idp)
	if !allowed(t, dial(t, r.GRPCAddr()), idp.token(t, "alice", testTenant, "viewer"), "/orders/1") {
		t.Fatal("Check denied")
	}
	if spans := tel.Spans().Recent(nil, time.Time{}); len(spans) != 0 {
		t.Errorf("unwatched Check recorded %d spans: %+v", len(spans), spans)
	}
	waitMetric(t, r, `(?m)^rpc_server_call_duration_seconds_count\{[^}]*rpc_method="envoy.service.auth.v3.Authorization/Check"[^}]*\} 1$`)
}

// waitMetric waits for /metrics to match expr: a call's duration is
// recorded at its end on the server, which may come after the client
// has its answer.
func waitMetric(t *testing.T, r *running, expr string) {
	t.Helper()
	re := regexp.MustCompile(expr)
	testkit.Poll(t, waitTimeout, "/metrics to match "+expr, func() (bool, string) {
		status, body := get(t, r, PathMetrics)
		return status == http.StatusOK && re.Match(body), "\n" + grep(body, "rpc_server")
	})
}

// grep returns the lines of b that contain s.
func grep(b []byte, s string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
