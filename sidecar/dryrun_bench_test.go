package sidecar

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/dryrun"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/policies"
	"github.com/svc-dev/svc/sidecar/live"
)

// BenchmarkCheckDryRun measures the Check throughput of the sidecar as
// svc-sidecar composes it (telemetry, audit log, live hub, dry-run
// manager) over loopback gRPC, benchCallers callers on benchConns
// connections, alternately without and with a dry-run session of a
// candidate policy active, b.N checks each per round, either mode first
// in turn. Reported: checks/s of each and their ratio with/without (the
// bar is at least 0.9); the process's CPU time per check of each (the
// callers' included; the session's from its start until its queue is
// drained) and their ratio without/with, which a shared machine's load
// disturbs far less than throughput.
func BenchmarkCheckDryRun(b *testing.B) {
	idp := newTestIdP(b)
	cfg, tel, auditLog := benchParts(b, idp)
	dry := dryrun.NewManager(dryrun.Deps{Audit: auditLog, Logger: quietLogger()})
	hub := live.NewHub(live.Deps{Spans: tel.Spans(), Sessions: dry, Logger: quietLogger()})
	eng, err := engine.New(cfg, engine.Deps{Logger: quietLogger(), TracerProvider: tel.TracerProvider(),
		MeterProvider: tel.MeterProvider(), Audit: auditLog, Observer: hub})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = eng.Close() })
	r := startServer(b, Deps{Engine: eng, Telemetry: tel, Audit: auditLog, Live: hub, DryRun: dry})
	testkit.Eventually(b, "ready", r.isReady)
	clients := authzClients(b, r.GRPCAddr())
	req := checkRequest(idp.token(b, "u-1", testTenant, "viewer"), "GET", "/orders/1")
	cand := benchCandidate(b)

	var took, cpu [2]time.Duration
	var evaluated, skipped uint64
	b.ResetTimer()
	for r := range benchRounds {
		// Either mode goes first in every other round: a shared machine's
		// load drifts, and the second run of a round finds a grown heap.
		for i := range 2 {
			mode := i ^ r%2
			cpu0 := processCPU(b)
			var sess *dryrun.Session
			if mode == 1 {
				if sess, err = dry.Start(cand, dryrun.Options{Duration: time.Hour}); err != nil {
					b.Fatal(err)
				}
			}
			took[mode] += driveChecks(b, clients, req, b.N)
			if sess != nil {
				dry.Stop(sess.ID())
				rep := sess.Report()
				evaluated += rep.Evaluated
				skipped += rep.Skipped
			}
			cpu[mode] += processCPU(b) - cpu0
		}
	}
	b.StopTimer()
	n := float64(b.N * benchRounds)
	off, on := n/took[0].Seconds(), n/took[1].Seconds()
	b.ReportMetric(off, "checks/s-without")
	b.ReportMetric(on, "checks/s-with-dry-run")
	b.ReportMetric(on/off, "ratio")
	// CPU time depends far less than throughput on what else the machine
	// runs: the process's CPU per check (callers included), and its ratio
	// without/with, the throughput ratio of a machine the checks saturate.
	b.ReportMetric(float64(cpu[0].Microseconds())/n, "cpu-us/check-without")
	b.ReportMetric(float64(cpu[1].Microseconds())/n, "cpu-us/check-with")
	b.ReportMetric(float64(cpu[0])/float64(cpu[1]), "cpu-ratio")
	b.ReportMetric(float64(skipped)/float64(evaluated+skipped), "skipped-share")
}

// processCPU is the CPU time (user and system) this process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// driveChecks sends n checks from benchCallers callers and returns the
// wall time they took.
func driveChecks(b *testing.B, clients []authv3.AuthorizationClient, req *authv3.CheckRequest, n int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for c := range benchCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := clients[c%len(clients)]
			for next.Add(1) <= int64(n) {
				resp, err := cl.Check(context.Background(), req)
				if err != nil || code.Code(resp.GetStatus().GetCode()) != code.Code_OK {
					b.Errorf("check: %v %v", resp.GetStatus(), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// benchCandidate is the default policy with viewers limited to listing
// orders, so that the candidate denies what enforcement allows.
func benchCandidate(b *testing.B) *policy.Set {
	src, err := fs.ReadFile(policies.Default, "authz.rego")
	if err != nil {
		b.Fatal(err)
	}
	mod := strings.Replace(string(src), `"viewer": {"*": {"read"}}`, `"viewer": {"orders": {"list"}}`, 1)
	set, err := policy.FromModules(map[string]string{"authz.rego": mod}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return set.WithRevision("bench-candidate")
}
