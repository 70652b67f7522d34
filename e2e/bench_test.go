package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/svc-dev/svc/internal/harness"
)

// Load of BenchmarkSidecarRSS.
const (
	rssTokens  = 100_000 // distinct tokens, each sent once
	rssCallers = 32      // concurrent callers
	rssConns   = 4       // connections they share
)

// rssConfig is a production-like deployment: fail closed, the default
// policy, audit log and token cache, and a rate limit too high to refuse
// any of the load.
const rssConfig = `
[sdk]
tenant_id = "acme"
fail_mode = "closed"

[tenants.acme]
plan = "team"

[rate_limit]
default_rpm = 1000000000000
`

const mib = 1 << 20

// BenchmarkSidecarRSS measures the memory of the real svc-sidecar process
// after it has seen 100k distinct valid RS256 tokens, sent over gRPC
// Authorization/Check by rssCallers concurrent callers: VmRSS before the
// load (idle-MiB), VmRSS after it (rss-MiB) and the peak VmHWM (hwm-MiB)
// from /proc/<pid>/status. The design's bar is 100 MiB. It also reports
// how many verified tokens the sidecar kept cached (cached-tokens) and the
// rate it answered at (checks/s).
//
// "default-cache" runs the configuration's default jwt.cache_size;
// "cache-100k" sets it to 100000 so that every token seen stays cached.
// The tokens are minted once, in parallel, before either case (RS256
// signing takes about a minute on two cores). Each case sends every token
// once whatever b.N is, so run it with -benchtime 1x; ns/op is the time
// the load took.
func BenchmarkSidecarRSS(b *testing.B) {
	if testing.Short() {
		b.Skip("mints and sends 100k RS256 tokens")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skipf("reads process memory from /proc: %v", err)
	}
	signer := harness.NewRSASigner(b, "rss-1", 2048, "RS256")
	jwks := harness.StartJWKS(b, signer)
	start := time.Now()
	reqs := rssRequests(b, signer, rssTokens)
	b.Logf("minted %d RS256 tokens in %s", len(reqs), time.Since(start).Round(time.Millisecond))

	for _, bc := range []struct {
		name      string
		cacheSize string // jwt.cache_size, "" for the default
	}{
		{"default-cache", ""},
		{"cache-100k", "100000"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := rssConfig
			if bc.cacheSize != "" {
				cfg += "\n[jwt]\ncache_size = " + bc.cacheSize + "\n"
			}
			s := harness.StartSidecar(b, harness.SidecarOptions{Config: cfg, Env: map[string]string{
				"SVC_JWKS_URL":  jwks.URL,
				"SVC_LOG_LEVEL": "info",
			}})
			idle := procStatus(b, s.Pid())
			clients := make([]authv3.AuthorizationClient, rssConns)
			for i := range clients {
				conn, err := grpc.NewClient(s.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = conn.Close() })
				clients[i] = authv3.NewAuthorizationClient(conn)
			}

			b.ResetTimer()
			began := time.Now()
			stopSampling := sampleRSS(s.Pid())
			sendAll(b, clients, reqs)
			elapsed := time.Since(began)
			peakSampled := stopSampling()
			b.StopTimer()

			after := procStatus(b, s.Pid())
			cached := tokenCacheEntries(b, s)
			b.ReportMetric(float64(idle["VmRSS"])/mib, "idle-MiB")
			b.ReportMetric(float64(after["VmRSS"])/mib, "rss-MiB")
			b.ReportMetric(float64(max(after["VmHWM"], peakSampled))/mib, "hwm-MiB")
			b.ReportMetric(cached, "cached-tokens")
			b.ReportMetric(float64(len(reqs))/elapsed.Seconds(), "checks/s")
			if hwm := max(after["VmHWM"], peakSampled); hwm > 100*mib {
				b.Logf("peak RSS %.1f MiB is above the design's bar of 100 MiB", float64(hwm)/mib)
			}
		})
	}
}

// rssRequests mints n tokens of distinct subjects and jti, valid for an
// hour, one goroutine per CPU, and wraps each in a Check request.
func rssRequests(b *testing.B, signer *harness.Signer, n int) []*authv3.CheckRequest {
	b.Helper()
	reqs := make([]*authv3.CheckRequest, n)
	exp := time.Now().Add(time.Hour).Unix()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				sub := "user-" + strconv.Itoa(i)
				tok := signer.Token(b, map[string]any{
					"sub": sub, "jti": "rss-" + strconv.Itoa(i), "tenant_id": harness.DefaultTenant,
					"roles": []string{"viewer"}, "email": sub + "@example.test",
					"iat": time.Now().Unix(), "exp": exp,
				})
				reqs[i] = checkRequestFor(tok, "/orders/"+strconv.Itoa(i))
			}
		})
	}
	wg.Wait()
	return reqs
}

func checkRequestFor(token, path string) *authv3.CheckRequest {
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "rss", Method: http.MethodGet, Path: path, Host: "api.example.test", Scheme: "https", Protocol: "HTTP/1.1",
			Headers: map[string]string{"authorization": "Bearer " + token, "user-agent": "e2e-bench"},
		}},
	}}
}

// sendAll sends every request once from rssCallers goroutines; every
// answer must be OK.
func sendAll(b *testing.B, clients []authv3.AuthorizationClient, reqs []*authv3.CheckRequest) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var (
		next     atomic.Int64
		failOnce sync.Once
		failure  error
		wg       sync.WaitGroup
	)
	for g := range rssCallers {
		client := clients[g%len(clients)]
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(reqs); i = int(next.Add(1) - 1) {
				resp, err := client.Check(ctx, reqs[i])
				if err == nil && code.Code(resp.GetStatus().GetCode()) != code.Code_OK {
					err = fmt.Errorf("request %d: status %v, body %q", i, resp.GetStatus(), resp.GetDeniedResponse().GetBody())
				}
				if err != nil {
					failOnce.Do(func() { failure = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	if failure != nil {
		b.Fatalf("Check: %v", failure)
	}
}

// sampleRSS polls VmRSS of pid until the returned function is called,
// which returns the highest value seen, in bytes.
func sampleRSS(pid int) func() int64 {
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if st, err := readProcStatus(pid); err == nil && st["VmRSS"] > peak.Load() {
				peak.Store(st["VmRSS"])
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}

func procStatus(b *testing.B, pid int) map[string]int64 {
	b.Helper()
	st, err := readProcStatus(pid)
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []string{"VmRSS", "VmHWM"} {
		if _, ok := st[k]; !ok {
			b.Fatalf("/proc/%d/status has no %s", pid, k)
		}
	}
	return st
}

// readProcStatus returns the "kB" fields of /proc/<pid>/status in bytes.
func readProcStatus(pid int) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if kb, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			st[name] = kb << 10
		}
	}
	return st, sc.Err()
}

var cacheEntries = regexp.MustCompile(`(?m)^svc_token_cache_entries\{[^}]*\} (\S+)$`)

// tokenCacheEntries reads how many verified tokens the sidecar caches
// from its /metrics.
func tokenCacheEntries(b *testing.B, s *harness.Sidecar) float64 {
	b.Helper()
	status, h, body := harness.Get(b, s.URL("/metrics"))
	if status != http.StatusOK {
		b.Fatalf("GET /metrics: %s", harness.Describe(status, h, body))
	}
	m := cacheEntries.FindSubmatch(body)
	if m == nil {
		b.Fatalf("/metrics has no svc_token_cache_entries")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		b.Fatal(err)
	}
	return v
}
