package sidecar

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestDrainIdleConnections: on shutdown, an idle gRPC client connection
// and an idle HTTP keep-alive connection do not hold the drain until its
// timeout (ten minutes here), while a request in flight still completes.
func TestDrainIdleConnections(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	const drain = 10 * time.Minute
	cfg.Sidecar.DrainTimeout = config.Duration{Duration: drain}
	r := startSidecar(t, cfg)

	// An idle gRPC connection: connected, one call made, none open.
	conn := dial(t, r.GRPCAddr())
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("gRPC health check: %v", err)
	}
	// An idle HTTP keep-alive connection: one request answered, kept open.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get("http://" + r.HTTPAddr().String() + PathHealthz)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c, rest := inFlight(t, r, idp)

	began := time.Now()
	r.cancel()
	testkit.Eventually(t, "readiness reports draining", func() bool { return !r.isReady() })
	if _, err := io.WriteString(c, rest); err != nil {
		t.Fatalf("send the rest of the body: %v", err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * waitTimeout))
	inflight, rerr := http.ReadResponse(bufio.NewReader(c), nil)
	if rerr != nil {
		t.Fatalf("in-flight request failed during the drain: %v", rerr)
	}
	got, _ := io.ReadAll(inflight.Body)
	inflight.Body.Close()
	if inflight.StatusCode != http.StatusOK || !strings.Contains(string(got), `"allowed":true`) {
		t.Errorf("in-flight request = %d %s, want 200 allowed", inflight.StatusCode, got)
	}
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
		t.Logf("stopped %s after the shutdown began, with idle gRPC and HTTP connections open", time.Since(began).Round(time.Millisecond))
	case <-time.After(2 * waitTimeout):
		t.Fatalf("still draining %s after the shutdown began with only idle connections left (drain timeout %s)", 2*waitTimeout, drain)
	}
}
