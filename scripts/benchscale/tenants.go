package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/engine/ratelimit"
)

// tenantCounts are the points of the tenants row: the same checks spread
// over this many tenants, each with a budget of its own.
var tenantCounts = []int{10, 1000, 10_000}

// tenantRounds are the alternating rounds of the limiter's checks.
const tenantRounds = 5

// tenantBudgets gives tenant i a budget of its own, in requests per
// minute, as a deployment's tenants table would.
func tenantBudgets(n int) (ratelimit.Budgets, []string) {
	names := make([]string, n)
	budgets := make(map[string]int, n)
	for i := range n {
		names[i] = fmt.Sprintf("tenant-%05d", i)
		budgets[names[i]] = 6000 + (i%100)*600
	}
	return func(t string) int { return budgets[t] }, names
}

// checkCost runs checks Allow calls from callers goroutines, each
// cycling through the tenants in its own random order, and returns the
// wall time per check (callers divided over the machine).
func checkCost(l ratelimit.Limiter, tenants []string, checks, callers int) (time.Duration, error) {
	per := checks / callers
	orders := make([][]string, callers)
	for c := range callers {
		rng := rand.New(rand.NewPCG(uint64(c), 7))
		orders[c] = make([]string, per)
		for i := range per {
			orders[c][i] = tenants[rng.IntN(len(tenants))]
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ferr error
	)
	ctx := context.Background()
	start := time.Now()
	for c := range callers {
		wg.Go(func() {
			for _, t := range orders[c] {
				if _, _, err := l.Allow(ctx, t); err != nil {
					mu.Lock()
					ferr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start) / time.Duration(per*callers), ferr
}

// startRedis starts a redis-server on a free loopback port, without
// persistence, and returns its address and a function stopping it.
func startRedis() (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, fmt.Errorf("redis-server is not installed: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "benchscale-redis-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait(); os.RemoveAll(dir) }
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for range 100 {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr, stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("redis-server did not listen on %s", addr)
}

func runTenants(o *options) (result, error) {
	res := result{
		What: fmt.Sprintf("tenants: checks spread over 10, 1,000 and 10,000 tenants, each with a budget of its own (rate_limit.per_tenant). Judged: the engine's whole in-process decision, Authorize with rate limits on, on cached ES256 tokens of %s users spread over the tenants, a policy isolating tenants (the decision cache keys on the tenant) with its decision cache and the verified-token cache at their default sizes, 1 caller, %d alternating rounds, CPU time of the process per decision (a loaded machine's other work moves wall time, not that); and a rate-limit check through a local redis-server (the sidecar's Lua bucket, 16 callers, %d alternating rounds, wall time: the round trip is the cost). Reported beside: the decisions' wall time, their CPU time under the same policy without its tenant rule (one cached decision for every tenant: the budgets alone), and the in-process limiter alone (ratelimit.Memory, 1 caller, wall time). Buckets made and tokens verified before the timing; medians",
			count(decisionUsers), decisionRounds, tenantRounds),
		Bound:     "per-check cost at 10k tenants within 20 % of at 10, local and Redis",
		CurveUnit: "cost per check ÷ the cost at 10 tenants",
	}
	addr, stop, err := startRedis()
	if err != nil {
		return res, err
	}
	defer stop()
	// Timeouts for a loaded machine: a round trip that times out fails
	// the row, it is not a figure.
	const timeout = 5 * time.Second
	client := redis.NewClient(ratelimit.RedisClientOptions(addr, timeout))
	defer client.Close()
	localChecks, redisChecks := 400_000, 40_000
	if o.quick {
		localChecks, redisChecks = 100_000, 10_000
	}
	cost := map[string][]float64{}
	for r := range tenantRounds {
		for _, n := range tenantCounts {
			budgets, names := tenantBudgets(n)
			// A fresh limiter a round, every tenant's bucket made before
			// the timing starts: the steady state of a sidecar whose
			// tenants keep calling.
			mem := ratelimit.NewMemory(budgets, nil)
			if _, err := checkCost(mem, names, 2*n, 1); err != nil {
				return res, err
			}
			d, err := checkCost(mem, names, localChecks, 1)
			if err != nil {
				return res, err
			}
			cost["limiter/"+count(n)] = append(cost["limiter/"+count(n)], us(d))
			prefix := fmt.Sprintf("bench:%d:%d", r, n)
			rl := ratelimit.NewRedis(client, budgets, ratelimit.RedisOptions{Prefix: prefix, Timeout: timeout})
			if _, err := checkCost(rl, names, 2*n, 16); err != nil {
				return res, err
			}
			d, err = checkCost(rl, names, redisChecks, 16)
			if err != nil {
				return res, err
			}
			cost["redis/"+count(n)] = append(cost["redis/"+count(n)], us(d))
		}
	}
	loadLimits := loadavg()
	// The decisions run in a process of their own, their rounds
	// alternating there.
	dm, err := measure("decisions", "", o)
	if err != nil {
		return res, err
	}
	loadDecisions := loadavg()
	rm, err := measure("decisions", "roles", o)
	if err != nil {
		return res, err
	}
	for _, n := range tenantCounts {
		// The child's medians.
		cost["decision/"+count(n)] = []float64{dm["decide_cpu_us_"+strconv.Itoa(n)]}
		cost["decision-wall/"+count(n)] = []float64{dm["decide_us_"+strconv.Itoa(n)]}
		cost["roles/"+count(n)] = []float64{rm["decide_cpu_us_"+strconv.Itoa(n)]}
	}
	med := func(k string) float64 {
		v := slices.Clone(cost[k])
		slices.Sort(v)
		return v[len(v)/2]
	}
	var parts []string
	ratios := map[string]float64{}
	last := count(tenantCounts[len(tenantCounts)-1])
	for _, kind := range []string{"decision", "redis", "decision-wall", "roles", "limiter"} {
		base := med(kind + "/" + count(tenantCounts[0]))
		var pts []string
		for _, n := range tenantCounts {
			k := kind + "/" + count(n)
			pts = append(pts, fmt.Sprintf("%s tenants %.3f µs", count(n), med(k)))
			res.Curve = append(res.Curve, plotPoint{k, med(k) / base})
		}
		ratios[kind] = med(kind+"/"+last) / base
		label := map[string]string{
			"decision":      "decision in process, CPU (judged)",
			"redis":         "Redis check (judged)",
			"decision-wall": "decision in process, wall time (detail)",
			"roles":         "decision in process, CPU, under the same policy without its tenant rule (detail)",
			"limiter":       "in-process limiter alone (detail)",
		}[kind]
		parts = append(parts, fmt.Sprintf("%s: %s; ratio 10k/10 %.2f", label, strings.Join(pts, ", "), ratios[kind]))
	}
	parts = append(parts, fmt.Sprintf("decision cache hit ratio over the timed rounds %.4f at 10, %.4f at 1k, %.4f at 10k tenants (%.0f decisions cached at 10k); load average %s (limiter, Redis), %s (decisions)",
		dm["decision_cache_hit_ratio_10"], dm["decision_cache_hit_ratio_1000"], dm["decision_cache_hit_ratio_10000"], dm["decision_cache_entries_10000"], loadLimits, loadDecisions))
	res.Figures = strings.Join(parts, ". ")
	res.Met = ratios["decision"] <= 1.2 && ratios["redis"] <= 1.2
	missCost := (1 - dm["decision_cache_hit_ratio_10000"]) * dm["eval_cpu_us"]
	why := fmt.Sprintf("A check is a decision: the bound is judged on the engine's in-process decision (with Redis, the limiter's round trip is the check's cost). What grows with the tenants is the decision cache, since the policy's decision depends on the tenant. At its default size (policy.decision_cache_size, 32,768 in 16 shards) it holds a decision for each of 10k tenants; its misses, %.2f %% of the decisions, each an evaluation of %.1f µs CPU, come to %.2f µs a decision. A hit reads, out of the CPU's caches at 10k tenants, one slot of an open-addressed table, one entry and its key (the input's key parts in one canonical byte string, compared whole); the decision cache of 10,000 entries that chased a map, a slot, an entry and each key part took 1.21-1.48× over four runs. Under the same policy without its tenant rule, whose decisions the cache holds once for every tenant, a decision costs %.2f× the CPU at 10k tenants: the budgets alone. The limiter alone takes %.2f µs a check at 10k tenants against %.2f at 10 (at 10k, one 64-byte slot of a 1 MiB table, out of the CPU's caches): %.0f %% of a decision's CPU at most",
		100*(1-dm["decision_cache_hit_ratio_10000"]), dm["eval_cpu_us"], missCost, ratios["roles"],
		med("limiter/"+last), med("limiter/10"), 100*max(med("limiter/"+last), med("limiter/10"))/med("decision/10"))
	switch {
	case ratios["decision"] > 1.2:
		res.Why = fmt.Sprintf("not met in process: a decision costs %.2f× the CPU at 10k tenants, %.2f µs more. %s", ratios["decision"], med("decision/"+last)-med("decision/10"), why)
	case ratios["redis"] > 1.2:
		res.Why = "not met through Redis: a check costs more with more tenants' keys in redis-server, or the machine's load moved the round trips (the ratio swung from 0.79 to 1.25 between runs at load 9-10). " + why
	default:
		res.Why = why
	}
	return res, nil
}
