package e2e

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
)

// floodClients is how many clients post to the ACS during a flood: more
// than the slots of a two-core machine, so that every slot stays taken.
const floodClients = 4

// floodPause is the pause of each flood client between two posts: the
// flood offers about floodClients/floodPause posts a second (80, or 8 s
// of validation work a second at the bounds, four times what this
// machine's CPUs could do), while the clients' own CPU, which shares the
// machine with the sidecar here but not in a real attack, stays small.
const floodPause = 50 * time.Millisecond

// floodAddrs is how many source addresses (127.0.1.x) each flood client
// posts from in turn: so many clients that their budgets together exceed
// the lane's, which then bounds the flood (one client is held to its own
// budget long before: TestSAMLACSOneClientCannotStarveSignIns).
const floodAddrs = 64

// BenchmarkCheckUnderACSFlood measures Envoy Check latency of one running
// svc-sidecar, first quiet ("quiet"), then while floodClients clients post
// to its ACS, every floodPause and each from floodAddrs addresses in turn,
// the costliest documents the ACS bounds let through (boundsDoc: about
// 9,900 elements under a forged Response signature) together with the
// review's 1 MiB nested body ("acs-flood").
// Each op is one Check from one caller; it reports p50-ms and p99-ms of
// the Checks, and for the flood acs-validated/s and acs-busy/s, the ACS
// answers per second of each kind. Run with -benchtime 2000x or more.
//
// "default-slots" runs the default acs_max_concurrent (half of
// GOMAXPROCS, at least 1); "slot-per-cpu" sets it to GOMAXPROCS.
func BenchmarkCheckUnderACSFlood(b *testing.B) {
	for _, bc := range []struct {
		name  string
		slots string // SVC_SAML_ACS_MAX_CONCURRENT, "" for the default
	}{
		{"default-slots", ""},
		{"slot-per-cpu", strconv.Itoa(runtime.GOMAXPROCS(0))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			// A rate limit too high to refuse any of the load.
			env := map[string]string{"SVC_RATE_LIMIT_DEFAULT_RPM": "1000000000000"}
			if bc.slots != "" {
				env["SVC_SAML_ACS_MAX_CONCURRENT"] = bc.slots
			}
			g := startSAMLTarget(b, env)
			token := g.k.token(b, "u-1", "acme", "admin")
			client := authv3.NewAuthorizationClient(g.s.Conn(b))
			req := checkRequestFor(token, "/orders/1")
			bodies := []string{formOf(boundsDoc(g)), nestedForm(1 << 20)}
			b.Run("quiet", func(b *testing.B) { checkLatency(b, client, req) })
			b.Run("acs-flood", func(b *testing.B) {
				ctx, cancel := context.WithCancel(context.Background())
				var validated, busy, other int64
				var mu sync.Mutex
				var wg sync.WaitGroup
				for i := range floodClients {
					hcs := make([]*http.Client, floodAddrs)
					for j := range hcs {
						hcs[j] = clientFrom(b, fmt.Sprintf("127.0.%d.%d", 1+i, 1+j))
					}
					wg.Go(func() {
						for n := i; ctx.Err() == nil; n++ {
							a, err := postAs(hcs[n%floodAddrs], g.acsURL(), bodies[n%len(bodies)], nil)
							mu.Lock()
							switch {
							case err != nil:
								other++
							case a.status == http.StatusServiceUnavailable:
								busy++
							case a.status == http.StatusUnauthorized || a.status == http.StatusBadRequest:
								validated++
							default:
								other++
							}
							mu.Unlock()
							select {
							case <-ctx.Done():
							case <-time.After(floodPause):
							}
						}
					})
				}
				time.Sleep(200 * time.Millisecond) // the flood under way
				start := time.Now()
				checkLatency(b, client, req)
				secs := time.Since(start).Seconds()
				cancel()
				wg.Wait()
				b.ReportMetric(float64(validated)/secs, "acs-validated/s")
				b.ReportMetric(float64(busy)/secs, "acs-busy/s")
				if other > 0 {
					b.Errorf("%d ACS answers neither a refusal nor saml-busy", other)
				}
			})
		})
	}
}

// checkLatency sends b.N Checks one after another and reports their p50
// and p99 in milliseconds.
func checkLatency(b *testing.B, client authv3.AuthorizationClient, req *authv3.CheckRequest) {
	b.Helper()
	lat := make([]time.Duration, 0, b.N)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		resp, err := client.Check(ctx, req)
		if err != nil || code.Code(resp.GetStatus().GetCode()) != code.Code_OK {
			b.Fatalf("Check: %v %v", err, resp.GetStatus())
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
}
