package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/natstest"
	"github.com/svc-dev/svc/internal/testkit/noopauthz"
	"github.com/svc-dev/svc/wire"
)

// Load of BenchmarkCompareNoop: Envoys of a node share a few connections
// to their sidecar and keep many checks in flight on them.
const (
	compareCallers = 32
	compareConns   = 4
	compareTokens  = 1000 // distinct users, each with a token of its own
	compareRounds  = 4    // the servers take turns, so both see the same machine
	// compareSampleRatio is the trace sampling ratio the sidecar is
	// configured with (OTEL_TRACES_SAMPLER=parentbased_traceidratio).
	compareSampleRatio = "0.1"
)

var (
	compareDuration = flag.Duration("compare.duration", 8*time.Second,
		"BenchmarkCompareNoop: load time of each server in each run, split over its rounds")
	compareIdentityToken = flag.Bool("compare.identity-token", false,
		"run the sidecar with identity tokens on (identity_token.signing_key_file): every allowed answer carries x-svc-identity")
	compareDecisionLog = flag.Bool("compare.decision-log", false,
		"also run a second sidecar with the decision log on, shipping to a NATS JetStream server (decision_log.sink = nats), in the same rounds")
	compareSink = flag.String("compare.decision-log-sink", "nats",
		"with -compare.decision-log, the sink: nats (a NATS JetStream server) or http (a service taking OPA-style uploads, in a process of its own)")
	compareDecode = flag.String("compare.client-decode", decodeWire,
		"how the load generator reads answers: wire (field by field against the schema, as Envoy's parser does, no Go messages built) or proto (proto.Unmarshal into Go messages)")
	compareSinkCPUs = flag.String("compare.sink-cpus", "",
		"with -compare.decision-log, pin the sink's process to these CPUs (taskset -c list), off the CPUs the benchmark runs on (start it under taskset -c with the others)")
	compareRuns = flag.Int("compare.runs", 3,
		"BenchmarkCompareNoop: runs, each of interleaved rounds; the medians are reported")
)

// noopAddrEnv makes the e2e test binary serve a no-op ext_authz server on
// the address it names instead of running tests (see TestMain).
const noopAddrEnv = "SVC_E2E_NOOP_AUTHZ_ADDR"

// BenchmarkCompareNoop measures Envoy's Authorization/Check against two
// processes in one sitting: svc-sidecar as production runs it (fail
// closed, RS256 tokens from a JWKS, the default policy, rate limits on
// with a budget the load never exhausts, the audit log written to a file,
// info logs, traces exported over OTLP with a sampling ratio of
// compareSampleRatio, Prometheus metrics) and a no-op ext_authz server
// that answers OK without looking at the request. One closed-loop client
// drives each in turn with compareCallers concurrent callers over
// compareConns connections, cycling through compareTokens users' tokens
// and as many order paths; every answer must be OK. A run gives each
// server -compare.duration (default 8s) in compareRounds alternating
// rounds; -compare.runs (default 3) runs follow each other.
//
// Reported, as medians over the runs: the checks per second of each and
// their ratio (throughput-ratio, sidecar/noop), the p50 and p99 latencies
// and their ratios, and the CPU time each server process spent per check
// (cpu-us/check, from /proc/<pid>/stat), which depends far less on what
// else runs on the machine than the throughput does; the CPU this
// process, the load generator, spent per check on each (the two share the
// machine's cores, so a richer answer that costs the client more to decode
// lowers the throughput too: by default the load generator reads answers
// as Envoy's parser does, -compare.client-decode proto builds Go
// messages); over the whole sitting, the sidecar's
// allocations per check. The log shows every run.
//
// With -compare.decision-log a third process, the same sidecar shipping
// its decision log to a NATS JetStream server (or, with
// -compare.decision-log-sink http, to a service taking OPA-style
// uploads), takes its turn in every round: dl-throughput-ratio is its
// checks per second over the no-op's, dl-vs-sidecar-ratio over the plain
// sidecar's, and <sink>-cpu-us/check the sink's CPU during its rounds.
// The sink shares the machine's cores unless -compare.sink-cpus pins it
// elsewhere (with the benchmark itself started under taskset -c on the
// other CPUs).
// Run it with -benchtime 1x (`make bench-compare`).
func BenchmarkCompareNoop(b *testing.B) {
	if testing.Short() {
		b.Skip("starts svc-sidecar and a no-op server and loads them for seconds")
	}
	if *compareRuns < 1 {
		b.Fatalf("-compare.runs must be at least 1, got %d", *compareRuns)
	}
	if *compareDecode != decodeWire && *compareDecode != decodeProto {
		b.Fatalf("-compare.client-decode %q: want %s or %s", *compareDecode, decodeWire, decodeProto)
	}
	signer := harness.NewRSASigner(b, "cmp-1", 2048, "RS256")
	jwks := harness.StartJWKS(b, signer)
	otlp := harness.StartOTLPReceiver(b)
	reqs := rssRequests(b, signer, compareTokens)

	env := map[string]string{
		"SVC_JWKS_URL":                jwks.URL,
		"SVC_LOG_LEVEL":               "info",
		"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.Endpoint,
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     compareSampleRatio,
	}
	if *compareIdentityToken {
		env["SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE"] = testkit.TokenKeyFile(b)
	}
	side := harness.StartSidecar(b, harness.SidecarOptions{Config: rssConfig, Env: env})
	if side.AuditPath == "" {
		b.Fatal("the sidecar writes no audit file")
	}
	noop := startNoopProcess(b)

	targets := []*compareTarget{
		{name: "sidecar", pid: side.Pid(), clients: compareClients(b, side.GRPCAddr)},
		{name: "noop", pid: noop.Pid(), clients: compareClients(b, noop.addr)},
	}
	// With the decision log: a second sidecar, the same but for the log,
	// takes its turn in every round, so that both ratios come from the
	// same sitting; the sink's CPU is read beside it.
	var dlSide *harness.Sidecar
	if *compareDecisionLog {
		sinkURL, sinkPid := startCompareSink(b, *compareSink)
		if *compareSinkCPUs != "" {
			// A sink on other hardware, as in production: its CPU is
			// not taken from the servers measured.
			if out, err := exec.Command("taskset", "-a", "-p", "-c", *compareSinkCPUs, strconv.Itoa(sinkPid)).CombinedOutput(); err != nil {
				b.Fatalf("taskset the sink: %v: %s", err, out)
			}
		}
		dlEnv := maps.Clone(env)
		dlEnv["SVC_DECISION_LOG_SINK"] = *compareSink
		dlEnv["SVC_DECISION_LOG_URL"] = sinkURL
		dlEnv["SVC_DECISION_LOG_SPOOL_DIR"] = b.TempDir()
		dlSide = harness.StartSidecar(b, harness.SidecarOptions{Config: rssConfig, Env: dlEnv})
		targets = append(targets, &compareTarget{name: "sidecar-dl", pid: dlSide.Pid(),
			clients: compareClients(b, dlSide.GRPCAddr), alsoPid: sinkPid})
	}
	for _, tg := range targets {
		// Every token verified and every connection up before timing.
		tg.run(b, reqs, 0, len(reqs))
		tg.reset()
	}
	mem0 := sidecarMemStats(b, side)
	var dlMem0 memStats
	if dlSide != nil {
		dlMem0 = sidecarMemStats(b, dlSide)
	}
	var (
		runs     []compareRun
		checks   int
		dlChecks int
	)
	b.ResetTimer()
	for range *compareRuns {
		for r := range compareRounds {
			// Each round starts with the next target in turn.
			for i := range targets {
				targets[(r+i)%len(targets)].run(b, reqs, *compareDuration/compareRounds, 0)
			}
		}
		run := compareRun{side: targets[0].summary(), noop: targets[1].summary()}
		if dlSide != nil {
			dl := targets[2].summary()
			run.dl = &dl
			dlChecks += len(targets[2].latencies)
		}
		runs = append(runs, run)
		checks += len(targets[0].latencies)
		for _, tg := range targets {
			tg.reset()
		}
	}
	b.StopTimer()
	mem1 := sidecarMemStats(b, side)
	var dlMem1 memStats
	if dlSide != nil {
		dlMem1 = sidecarMemStats(b, dlSide)
	}

	b.ReportMetric((mem1.mallocs-mem0.mallocs)/float64(checks), "sidecar-allocs/check")
	b.ReportMetric((mem1.bytes-mem0.bytes)/float64(checks), "sidecar-B/check")
	b.ReportMetric((mem1.gcs-mem0.gcs)/float64(checks)*1000, "sidecar-gc/1k-checks")
	med := func(f func(compareRun) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		return median(v)
	}
	b.ReportMetric(med(func(r compareRun) float64 { return r.side.rate }), "sidecar-checks/s")
	b.ReportMetric(med(func(r compareRun) float64 { return r.noop.rate }), "noop-checks/s")
	b.ReportMetric(med(compareRun.throughputRatio), "throughput-ratio")
	b.ReportMetric(med(func(r compareRun) float64 { return us(r.side.p50) }), "sidecar-p50-us")
	b.ReportMetric(med(func(r compareRun) float64 { return us(r.noop.p50) }), "noop-p50-us")
	b.ReportMetric(med(func(r compareRun) float64 { return float64(r.side.p50) / float64(r.noop.p50) }), "p50-ratio")
	b.ReportMetric(med(func(r compareRun) float64 { return us(r.side.p99) }), "sidecar-p99-us")
	b.ReportMetric(med(func(r compareRun) float64 { return us(r.noop.p99) }), "noop-p99-us")
	b.ReportMetric(med(func(r compareRun) float64 { return float64(r.side.p99) / float64(r.noop.p99) }), "p99-ratio")
	b.ReportMetric(med(func(r compareRun) float64 { return r.side.cpuPerCheck }), "sidecar-cpu-us/check")
	b.ReportMetric(med(func(r compareRun) float64 { return r.noop.cpuPerCheck }), "noop-cpu-us/check")
	b.ReportMetric(med(func(r compareRun) float64 { return r.side.cpuPerCheck / r.noop.cpuPerCheck }), "cpu-ratio")
	b.ReportMetric(med(func(r compareRun) float64 { return r.side.clientPerCheck }), "client-cpu-us/check-sidecar")
	b.ReportMetric(med(func(r compareRun) float64 { return r.noop.clientPerCheck }), "client-cpu-us/check-noop")
	if dlSide != nil {
		b.ReportMetric((dlMem1.mallocs-dlMem0.mallocs)/float64(dlChecks), "dl-allocs/check")
		b.ReportMetric(med(func(r compareRun) float64 { return r.dl.rate / r.noop.rate }), "dl-throughput-ratio")
		b.ReportMetric(med(func(r compareRun) float64 { return r.dl.rate / r.side.rate }), "dl-vs-sidecar-ratio")
		b.ReportMetric(med(func(r compareRun) float64 { return us(r.dl.p50) }), "dl-p50-us")
		b.ReportMetric(med(func(r compareRun) float64 { return us(r.dl.p99) }), "dl-p99-us")
		b.ReportMetric(med(func(r compareRun) float64 { return r.dl.cpuPerCheck }), "dl-cpu-us/check")
		b.ReportMetric(med(func(r compareRun) float64 { return r.dl.alsoPerCheck }), *compareSink+"-cpu-us/check")
	}
	// One line a run: go test cuts a benchmark's log after ten lines.
	var log strings.Builder
	fmt.Fprintf(&log, "\n%-5s %20s %20s %20s %20s %20s %10s",
		"", "checks/s side/noop", "p50 µs side/noop", "p99 µs side/noop", "cpu µs/check s/n", "client µs/check s/n", "ratio")
	for i, r := range runs {
		s, n := r.side, r.noop
		fmt.Fprintf(&log, "\nrun %d %9.0f / %-8.0f %9.0f / %-8.0f %9.0f / %-8.0f %9.1f / %-8.1f %9.1f / %-8.1f %10.2f",
			i+1, s.rate, n.rate, us(s.p50), us(n.p50), us(s.p99), us(n.p99), s.cpuPerCheck, n.cpuPerCheck,
			s.clientPerCheck, n.clientPerCheck, r.throughputRatio())
	}
	fmt.Fprintf(&log, "\nmedian throughput ratio %.2f over %d runs (cpu ratio %.2f, client decode %s); sidecar %.1f allocations per check",
		med(compareRun.throughputRatio), len(runs),
		med(func(r compareRun) float64 { return r.side.cpuPerCheck / r.noop.cpuPerCheck }), *compareDecode,
		(mem1.mallocs-mem0.mallocs)/float64(checks))
	if dlSide != nil {
		fmt.Fprintf(&log, "\n%-5s %20s %20s %20s %20s %20s %10s", "dl", "checks/s", "p50 µs", "p99 µs", "cpu µs/check", *compareSink+" µs/check", "ratio")
		for i, r := range runs {
			d := r.dl
			fmt.Fprintf(&log, "\nrun %d %20.0f %20.0f %20.0f %20.1f %20.1f %10.2f",
				i+1, d.rate, us(d.p50), us(d.p99), d.cpuPerCheck, d.alsoPerCheck, d.rate/r.noop.rate)
		}
		fmt.Fprintf(&log, "\nwith the decision log: median throughput ratio %.2f (cpu ratio %.2f, %.2f of the sidecar without it); %.1f allocations per check",
			med(func(r compareRun) float64 { return r.dl.rate / r.noop.rate }),
			med(func(r compareRun) float64 { return r.dl.cpuPerCheck / r.noop.cpuPerCheck }),
			med(func(r compareRun) float64 { return r.dl.rate / r.side.rate }),
			(dlMem1.mallocs-dlMem0.mallocs)/float64(dlChecks))
	}
	b.Log(log.String())
	if len(otlp.Spans()) == 0 {
		b.Error("the sidecar exported no span: telemetry was not on")
	}
	if dlSide != nil {
		// Every check was spooled before its answer; all reach the sink.
		var dl *wire.DecisionLogStatus
		testkit.Eventually(b, "the decision log's spool emptied", func() bool {
			st, err := fetchStatus(dlSide)
			if err != nil || st.DecisionLog == nil {
				return false
			}
			dl = st.DecisionLog
			return dl.Unsent == 0
		})
		if dl.Shipped < int64(dlChecks) || dl.Dropped != 0 {
			b.Errorf("decision log: %d shipped, %d dropped, for %d timed checks", dl.Shipped, dl.Dropped, dlChecks)
		}
		b.ReportMetric(float64(dl.Shipped), "decision-log-shipped")
	}
}

// compareRun is what one run of interleaved rounds measured; dl is the
// sidecar with the decision log, under -compare.decision-log.
type compareRun struct {
	side, noop compareSummary
	dl         *compareSummary
}

func (r compareRun) throughputRatio() float64 { return r.side.rate / r.noop.rate }

// median is the middle value of v (the mean of the two middle ones for
// an even count); v is reordered.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// memStats are the sidecar's allocation counters from its /metrics.
type memStats struct{ mallocs, bytes, gcs float64 }

var (
	mallocsMetric = regexp.MustCompile(`(?m)^go_memstats_mallocs_total (\S+)$`)
	bytesMetric   = regexp.MustCompile(`(?m)^go_memstats_alloc_bytes_total (\S+)$`)
	gcsMetric     = regexp.MustCompile(`(?m)^go_gc_duration_seconds_count (\S+)$`)
)

func sidecarMemStats(b *testing.B, s *harness.Sidecar) memStats {
	b.Helper()
	status, h, body := harness.Get(b, s.URL("/metrics"))
	if status != http.StatusOK {
		b.Fatalf("GET /metrics: %s", harness.Describe(status, h, body))
	}
	value := func(re *regexp.Regexp) float64 {
		m := re.FindSubmatch(body)
		if m == nil {
			b.Fatalf("/metrics has no match for %s", re)
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	return memStats{value(mallocsMetric), value(bytesMetric), value(gcsMetric)}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// compareTarget is one ext_authz server process under load and what it
// measured.
type compareTarget struct {
	name      string
	pid       int
	clients   []authv3.AuthorizationClient
	latencies []time.Duration
	wall      time.Duration
	cpu       time.Duration
	// clientCPU is the CPU this process, the load generator, spent
	// meanwhile: mostly gRPC, and decoding the answers.
	clientCPU time.Duration
	// alsoPid is a process working for the target (its decision log's
	// NATS server), whose CPU is counted apart in alsoCPU; 0 for none.
	alsoPid int
	alsoCPU time.Duration
}

func (tg *compareTarget) reset() {
	tg.latencies, tg.wall, tg.cpu, tg.clientCPU, tg.alsoCPU = tg.latencies[:0], 0, 0, 0, 0
}

// run loads the target from compareCallers goroutines, for d, or for n
// calls in all when d is 0. Call i sends reqs[(start+i) % len(reqs)].
func (tg *compareTarget) run(b *testing.B, reqs []*authv3.CheckRequest, d time.Duration, n int) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		next     = len(tg.latencies)
		end      = next + n
		failure  error
		wg       sync.WaitGroup
		deadline time.Time
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if failure != nil || (d == 0 && next >= end) {
			return 0, false
		}
		next++
		return next - 1, true
	}
	cpu0, self0 := testkit.ProcessCPU(b, tg.pid), testkit.ProcessCPU(b, os.Getpid())
	var also0 time.Duration
	if tg.alsoPid != 0 {
		also0 = testkit.ProcessCPU(b, tg.alsoPid)
	}
	start := time.Now()
	if d > 0 {
		deadline = start.Add(d)
	}
	lats := make([][]time.Duration, compareCallers)
	for g := range compareCallers {
		client := tg.clients[g%len(tg.clients)]
		wg.Go(func() {
			for d == 0 || time.Now().Before(deadline) {
				i, ok := take()
				if !ok {
					return
				}
				t0 := time.Now()
				resp, err := client.Check(ctx, reqs[i%len(reqs)])
				lats[g] = append(lats[g], time.Since(t0))
				if err == nil && code.Code(resp.GetStatus().GetCode()) != code.Code_OK {
					err = fmt.Errorf("status %v, denied body %q", resp.GetStatus(), resp.GetDeniedResponse().GetBody())
				}
				if err != nil {
					mu.Lock()
					if failure == nil {
						failure = err
						cancel()
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	tg.wall += time.Since(start)
	tg.cpu += testkit.ProcessCPU(b, tg.pid) - cpu0
	tg.clientCPU += testkit.ProcessCPU(b, os.Getpid()) - self0
	if tg.alsoPid != 0 {
		tg.alsoCPU += testkit.ProcessCPU(b, tg.alsoPid) - also0
	}
	if failure != nil {
		b.Fatalf("%s: Check: %v", tg.name, failure)
	}
	for _, l := range lats {
		tg.latencies = append(tg.latencies, l...)
	}
}

type compareSummary struct {
	rate           float64 // checks per second
	p50, p99       time.Duration
	cpuPerCheck    float64 // µs of server CPU per check
	clientPerCheck float64 // µs of the load generator's CPU per check
	alsoPerCheck   float64 // µs of the CPU of compareTarget.alsoPid per check
}

func (tg *compareTarget) summary() compareSummary {
	s := slices.Clone(tg.latencies)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		if len(s) == 0 {
			return 0
		}
		return s[max(0, min(int(q*float64(len(s))+0.999999)-1, len(s)-1))]
	}
	n := float64(len(s))
	return compareSummary{
		rate:           n / tg.wall.Seconds(),
		p50:            rank(0.50),
		p99:            rank(0.99),
		cpuPerCheck:    us(tg.cpu) / n,
		clientPerCheck: us(tg.clientCPU) / n,
		alsoPerCheck:   us(tg.alsoCPU) / n,
	}
}

func compareClients(b *testing.B, addr string) []authv3.AuthorizationClient {
	b.Helper()
	cs := make([]authv3.AuthorizationClient, compareConns)
	for i := range cs {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(answerCodec{mode: *compareDecode})))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		cs[i] = authv3.NewAuthorizationClient(conn)
	}
	return cs
}

// noopProcess is the e2e test binary serving noopauthz.Server.
type noopProcess struct {
	*harness.Process
	addr string
}

// startCompareSink starts the decision log's sink of kind (nats, http)
// and returns its URL and the pid of its process.
func startCompareSink(b *testing.B, kind string) (string, int) {
	b.Helper()
	switch kind {
	case "nats":
		nats := natstest.Start(b)
		return nats.URL(), nats.Pid()
	case "http":
		p, addr := startNoopServer(b, "decision-log-service", decisionReceiverAddrEnv)
		return "http://" + addr, p.Pid()
	}
	b.Fatalf("-compare.decision-log-sink %q: want nats or http", kind)
	return "", 0
}

// startNoopProcess runs this test binary as a no-op ext_authz server in a
// process of its own, as the sidecar runs in one, and waits until it
// accepts connections.
func startNoopProcess(b *testing.B) *noopProcess {
	p, addr := startNoopServer(b, "noop-authz", noopAddrEnv)
	return &noopProcess{Process: p, addr: addr}
}

// startNoopServer runs this test binary with env set to a free address,
// which TestMain serves a no-op server of its kind on, and waits until it
// accepts connections.
func startNoopServer(b *testing.B, name, env string) (*harness.Process, string) {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	addr := harness.FreeAddr(b)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), env+"="+addr)
	p := harness.StartProcess(b, name, cmd)
	harness.WaitListening(b, p, addr, harness.ReadyTimeout)
	return p, addr
}

// serveNoop serves noopauthz.Server on addr until SIGTERM or SIGINT.
func serveNoop(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	authv3.RegisterAuthorizationServer(g, noopauthz.Server{})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	if err := g.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
