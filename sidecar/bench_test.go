package sidecar

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/noopauthz"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

// Load shape of BenchmarkLoopbackCheck: many callers over a few shared
// connections, as the Envoys of a node would.
const (
	benchCallers = 32
	benchConns   = 4
	// benchRounds alternates the two servers, so that both see the same
	// machine: a shared machine's load drifts over a run.
	benchRounds = 4
	// benchDistinct is the number of tokens of the distinct-tokens case.
	benchDistinct = 1000
)

// BenchmarkLoopbackCheck measures Envoy's Authorization/Check over
// loopback gRPC against (a) the sidecar as svc-sidecar composes it (real
// engine, RS256 token, default policy, rate limiter, audit log, telemetry)
// and (b) a bare ext_authz server that answers OK without work, in the
// same run, alternating between them. Both get b.N calls from
// benchCallers concurrent callers over benchConns connections.
//
// Reported: the p50 and p99 latency of each (µs), their ratios
// sidecar/noop (the design's bar is at most 1.5), the token-cache hit
// rate, and as ns/op the sidecar's wall time per call at that
// concurrency. Requests cycle through 1000 order paths. "same-token"
// sends one token (verified once, then cached); "distinct-tokens-1000"
// cycles through 1000 tokens, each verified on first sight by a sidecar
// started cold for the run. Allocations are not reported: callers and
// both servers share the process.
func BenchmarkLoopbackCheck(b *testing.B) {
	idp := newTestIdP(b)
	noopAddr := startNoopAuthz(b)
	cases := []struct {
		name   string
		tokens []string
	}{
		{"same-token", []string{idp.token(b, "alice", testTenant, "viewer")}},
		{fmt.Sprintf("distinct-tokens-%d", benchDistinct), mintTokens(b, idp, benchDistinct)},
	}
	for _, bc := range cases {
		// Every request reads another order, as traffic does.
		reqs := make([]*authv3.CheckRequest, benchDistinct)
		for i := range reqs {
			reqs[i] = checkRequest(bc.tokens[i%len(bc.tokens)], http.MethodGet, "/orders/"+strconv.Itoa(i))
		}
		b.Run(bc.name, func(b *testing.B) {
			sc := startBenchSidecar(b, idp)
			targets := []*loadTarget{
				{name: "sidecar", clients: authzClients(b, sc.GRPCAddr())},
				{name: "noop", clients: authzClients(b, noopAddr)},
			}
			for _, tg := range targets {
				tg.drive(b, reqs[:1], 0, 1)            // verify the first token once
				tg.drive(b, reqs[:1], 0, benchCallers) // connect every client
				tg.latencies = make([]time.Duration, 0, b.N)
				tg.wall = 0
			}
			b.ResetTimer()
			for r := range benchRounds {
				n := b.N*(r+1)/benchRounds - b.N*r/benchRounds
				order := targets
				if r%2 == 1 {
					order = []*loadTarget{targets[1], targets[0]}
				}
				for _, tg := range order {
					tg.drive(b, reqs, len(tg.latencies), n)
				}
			}
			b.StopTimer()

			side, noop := targets[0], targets[1]
			sp50, sp99 := side.percentiles()
			np50, np99 := noop.percentiles()
			b.ReportMetric(float64(side.wall.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(us(sp50), "sidecar-p50-us")
			b.ReportMetric(us(sp99), "sidecar-p99-us")
			b.ReportMetric(us(np50), "noop-p50-us")
			b.ReportMetric(us(np99), "noop-p99-us")
			b.ReportMetric(float64(sp50)/float64(np50), "p50-ratio")
			b.ReportMetric(float64(sp99)/float64(np99), "p99-ratio")
			hits, misses := tokenCacheLookups(b, sc)
			b.ReportMetric(100*hits/(hits+misses), "cache-hit-%")
			if want := min(len(bc.tokens), b.N); int(misses) != want {
				b.Errorf("token cache misses = %v, want one per distinct token seen (%d)", misses, want)
			}
		})
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// loadTarget is one ext_authz server under load and what it measured.
type loadTarget struct {
	name      string
	clients   []authv3.AuthorizationClient
	latencies []time.Duration
	wall      time.Duration
}

// drive makes n Check calls from benchCallers goroutines, request i+offset
// (modulo len(reqs)) for call i, and appends each call's latency. Every
// answer must be OK.
func (tg *loadTarget) drive(b *testing.B, reqs []*authv3.CheckRequest, offset, n int) {
	lat := make([]time.Duration, n)
	var (
		next     atomic.Int64
		failOnce sync.Once
		failure  error
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	for g := range benchCallers {
		client := tg.clients[g%len(tg.clients)]
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				resp, err := client.Check(ctx, reqs[(offset+i)%len(reqs)])
				lat[i] = time.Since(t0)
				if err == nil && code.Code(resp.GetStatus().GetCode()) != code.Code_OK {
					err = fmt.Errorf("status %v, denied body %q", resp.GetStatus(), resp.GetDeniedResponse().GetBody())
				}
				if err != nil {
					failOnce.Do(func() { failure = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	tg.wall += time.Since(start)
	if failure != nil {
		b.Fatalf("%s: Check: %v", tg.name, failure)
	}
	tg.latencies = append(tg.latencies, lat...)
}

// percentiles returns the p50 and p99 of the latencies (nearest rank).
func (tg *loadTarget) percentiles() (p50, p99 time.Duration) {
	s := slices.Clone(tg.latencies)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		if len(s) == 0 {
			return 0
		}
		i := int(q*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return rank(0.50), rank(0.99)
}

// startBenchSidecar serves a sidecar composed as svc-sidecar composes it:
// telemetry (spans to the in-process feed, metrics on /metrics), an audit
// log (to io.Discard) and the rate limiter, with a budget that never runs
// out, so that every allowed request costs what it does in production.
func startBenchSidecar(b testing.TB, idp *testIdP) *running {
	b.Helper()
	return startBenchSidecarWith(b, idp, nil)
}

// startBenchSidecarWith is startBenchSidecar with configure applied to
// the configuration first, when it is not nil.
func startBenchSidecarWith(b testing.TB, idp *testIdP, configure func(*config.Config)) *running {
	b.Helper()
	cfg, tel, auditLog := benchParts(b, idp)
	if configure != nil {
		configure(&cfg)
	}
	eng, err := engine.New(cfg, engine.Deps{
		Logger: quietLogger(), TracerProvider: tel.TracerProvider(), MeterProvider: tel.MeterProvider(), Audit: auditLog,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Close() })
	r := startServer(b, Deps{Engine: eng, Telemetry: tel, Audit: auditLog})
	testkit.Eventually(b, "ready", r.isReady)
	return r
}

// benchParts are what a benchmark sidecar is composed of, as svc-sidecar
// composes it: a configuration for idp whose rate budget never runs out,
// telemetry, and an audit log to io.Discard; all end with b.
func benchParts(b testing.TB, idp *testIdP) (config.Config, *telemetry.Telemetry, *audit.Logger) {
	b.Helper()
	cfg := testConfig(idp)
	cfg.RateLimit.DefaultRPM = 1 << 40
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	auditLog := audit.New(io.Discard, audit.Options{QueueSize: cfg.Audit.QueueSize, Logger: quietLogger()})
	b.Cleanup(func() { _ = auditLog.Close(context.Background()) })
	return cfg, tel, auditLog
}

// startNoopAuthz serves noopauthz.Server on a loopback port of its own.
func startNoopAuthz(b *testing.B) net.Addr {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	authv3.RegisterAuthorizationServer(g, noopauthz.Server{})
	go func() { _ = g.Serve(lis) }()
	b.Cleanup(g.Stop)
	return lis.Addr()
}

// authzClients returns benchConns clients, each on a connection of its
// own to addr.
func authzClients(b *testing.B, addr net.Addr) []authv3.AuthorizationClient {
	b.Helper()
	cs := make([]authv3.AuthorizationClient, benchConns)
	for i := range cs {
		cs[i] = authv3.NewAuthorizationClient(dial(b, addr))
	}
	return cs
}

// mintTokens signs n RS256 tokens of distinct subjects with idp, one goroutine per
// CPU.
func mintTokens(b *testing.B, idp *testIdP, n int) []string {
	b.Helper()
	toks := make([]string, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, runtime.GOMAXPROCS(0))
	exp := time.Now().Add(time.Hour).Unix()
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				tok, err := idp.Sign(map[string]any{
					"sub": "user-" + strconv.Itoa(i), "jti": "bench-" + strconv.Itoa(i), "tenant_id": testTenant,
					"roles": []string{"viewer"}, "iat": time.Now().Unix(), "exp": exp,
				})
				if err != nil {
					errs <- err
					return
				}
				toks[i] = tok
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("mint tokens: %v", err)
	}
	return toks
}

// tokenCacheLookups reads the verified-token cache's hits and misses from
// the sidecar's /metrics.
func tokenCacheLookups(b *testing.B, r *running) (hits, misses float64) {
	b.Helper()
	code, body := get(b, r, PathMetrics)
	if code != http.StatusOK {
		b.Fatalf("GET %s = %d", PathMetrics, code)
	}
	value := func(outcome string) float64 {
		re := regexp.MustCompile(`(?m)^svc_token_cache_lookups_total\{[^}]*outcome="` + outcome + `"[^}]*\} (\S+)$`)
		m := re.FindSubmatch(body)
		if m == nil {
			b.Fatalf("/metrics has no token cache %s count", outcome)
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	return value("hit"), value("miss")
}
