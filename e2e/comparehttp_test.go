package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// noopHTTPAddrEnv makes the e2e test binary serve a no-op HTTP check
// server on the address it names instead of running tests (TestMain).
const noopHTTPAddrEnv = "SVC_E2E_NOOP_HTTP_ADDR"

// BenchmarkCompareHTTPNoop measures GET /check, called as Caddy's
// forward_auth calls it (the original method, URI and host in
// X-Forwarded-* headers, the caller's bearer token), against two
// processes in one sitting: svc-sidecar configured as for
// BenchmarkCompareNoop (RS256 tokens of compareTokens users from a JWKS,
// the default role policy, rate limits, audit log, traces sampled at
// compareSampleRatio) and a Go net/http server answering 200 without
// looking at the request. compareCallers goroutines share one keep-alive
// HTTP/1.1 client; the servers take turns over compareRounds rounds of
// -compare.duration in all. Reported: checks per second of each and their
// ratio (throughput-ratio), and the CPU each server process spent per
// check and their ratio (cpu-ratio).
func BenchmarkCompareHTTPNoop(b *testing.B) {
	if testing.Short() {
		b.Skip("starts svc-sidecar and a no-op server and loads them for seconds")
	}
	signer := harness.NewRSASigner(b, "cmp-http", 2048, "RS256")
	jwks := harness.StartJWKS(b, signer)
	otlp := harness.StartOTLPReceiver(b)
	reqs := rssRequests(b, signer, compareTokens)
	side := harness.StartSidecar(b, harness.SidecarOptions{Config: rssConfig, Env: map[string]string{
		"SVC_JWKS_URL":                jwks.URL,
		"SVC_LOG_LEVEL":               "info",
		"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.Endpoint,
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     compareSampleRatio,
	}})
	noop, noopAddr := startNoopServer(b, "noop-http", noopHTTPAddrEnv)
	type target struct {
		name, url string
		pid       int
		checks    int
		wall, cpu time.Duration
	}
	targets := []*target{
		{name: "sidecar", url: side.URL("/check"), pid: side.Pid()},
		{name: "noop", url: "http://" + noopAddr + "/check", pid: noop.Pid()},
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: compareCallers, MaxConnsPerHost: compareCallers, DisableCompression: true}}
	b.Cleanup(client.CloseIdleConnections)
	run := func(tg *target, d time.Duration, n int) {
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			next    int
			failure error
		)
		cpu0 := testkit.ProcessCPU(b, tg.pid)
		start := time.Now()
		deadline := start.Add(d)
		for range compareCallers {
			wg.Go(func() {
				for {
					mu.Lock()
					i := next
					next++
					stop := failure != nil || (d > 0 && time.Now().After(deadline)) || (d == 0 && i >= n)
					mu.Unlock()
					if stop {
						return
					}
					hr := reqs[i%len(reqs)].GetAttributes().GetRequest().GetHttp()
					req, _ := http.NewRequest(http.MethodGet, tg.url, nil)
					req.Header.Set("Authorization", hr.GetHeaders()["authorization"])
					req.Header.Set("X-Forwarded-Method", hr.GetMethod())
					req.Header.Set("X-Forwarded-Uri", hr.GetPath())
					req.Header.Set("X-Forwarded-Host", hr.GetHost())
					req.Header.Set("X-Forwarded-Proto", "https")
					req.Header.Set("X-Forwarded-For", "203.0.113.7")
					resp, err := client.Do(req)
					if err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							err = fmt.Errorf("status %d", resp.StatusCode)
						}
					}
					if err != nil {
						mu.Lock()
						failure = err
						mu.Unlock()
						return
					}
				}
			})
		}
		wg.Wait()
		if failure != nil {
			b.Fatalf("%s: GET /check: %v", tg.name, failure)
		}
		tg.wall += time.Since(start)
		tg.cpu += testkit.ProcessCPU(b, tg.pid) - cpu0
		tg.checks += next - compareCallers
	}
	for _, tg := range targets {
		// Every token verified and every connection up before timing.
		run(tg, 0, len(reqs))
		tg.checks, tg.wall, tg.cpu = 0, 0, 0
	}
	b.ResetTimer()
	for r := range compareRounds {
		order := targets
		if r%2 == 1 {
			order = []*target{targets[1], targets[0]}
		}
		for _, tg := range order {
			run(tg, *compareDuration/compareRounds, 0)
		}
	}
	b.StopTimer()
	rate := func(tg *target) float64 { return float64(tg.checks) / tg.wall.Seconds() }
	cpu := func(tg *target) float64 { return us(tg.cpu) / float64(tg.checks) }
	b.ReportMetric(rate(targets[0]), "sidecar-checks/s")
	b.ReportMetric(rate(targets[1]), "noop-checks/s")
	b.ReportMetric(rate(targets[0])/rate(targets[1]), "throughput-ratio")
	b.ReportMetric(cpu(targets[0]), "sidecar-cpu-us/check")
	b.ReportMetric(cpu(targets[1]), "noop-cpu-us/check")
	b.ReportMetric(cpu(targets[0])/cpu(targets[1]), "cpu-ratio")
}

// serveNoopHTTP answers 200 with an empty body to every request on addr
// until SIGTERM or SIGINT.
func serveNoopHTTP(addr string) error {
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(0))
		w.WriteHeader(http.StatusOK)
	})}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
