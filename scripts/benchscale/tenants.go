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
		What:      "tenants: rate-limit checks spread over 10, 1,000 and 10,000 tenants, each with a budget of its own, in process (ratelimit.Memory, 1 caller) and through a local redis-server (the sidecar's Lua bucket, 16 callers); each tenant's bucket made before the timing; wall time per check, median of 5 alternating rounds",
		Bound:     "per-check cost at 10k tenants within 20 % of at 10, local and Redis",
		CurveUnit: "cost per check ÷ the cost at 10 tenants",
	}
	addr, stop, err := startRedis()
	if err != nil {
		return res, err
	}
	defer stop()
	client := redis.NewClient(ratelimit.RedisClientOptions(addr, 0))
	defer client.Close()
	const rounds = 5
	localChecks, redisChecks := 400_000, 40_000
	if o.quick {
		localChecks, redisChecks = 100_000, 10_000
	}
	cost := map[string][]float64{}
	for r := range rounds {
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
			cost["local/"+count(n)] = append(cost["local/"+count(n)], us(d))
			prefix := fmt.Sprintf("bench:%d:%d", r, n)
			rl := ratelimit.NewRedis(client, budgets, ratelimit.RedisOptions{Prefix: prefix, Timeout: time.Second})
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
	med := func(k string) float64 {
		v := slices.Clone(cost[k])
		slices.Sort(v)
		return v[len(v)/2]
	}
	var parts []string
	ratios := map[string]float64{}
	for _, kind := range []string{"local", "redis"} {
		base := med(kind + "/" + count(tenantCounts[0]))
		var pts []string
		for _, n := range tenantCounts {
			k := kind + "/" + count(n)
			pts = append(pts, fmt.Sprintf("%s tenants %.3f µs", count(n), med(k)))
			res.Curve = append(res.Curve, plotPoint{k, med(k) / base})
		}
		ratios[kind] = med(kind+"/"+count(tenantCounts[len(tenantCounts)-1])) / base
		parts = append(parts, fmt.Sprintf("%s: %s; ratio 10k/10 %.2f", kind, strings.Join(pts, ", "), ratios[kind]))
	}
	res.Figures = strings.Join(parts, ". ")
	res.Met = ratios["local"] <= 1.2 && ratios["redis"] <= 1.2
	switch {
	case ratios["local"] > 1.2:
		res.Why = fmt.Sprintf("not met in process: the limiter alone costs %.1f× as much at 10k tenants, %.2f µs more. A check hashes the tenant's name once and reads its one 64-byte slot of an open-addressed table (name, budget and tokens together); a ratio above 1.2 means the slots no longer stay in the CPU's caches on this machine (compare go test -bench MemoryTenants ./engine/ratelimit/ on a quiet machine)", ratios["local"], med("local/"+count(tenantCounts[len(tenantCounts)-1]))-med("local/"+count(tenantCounts[0])))
	case ratios["redis"] > 1.2:
		res.Why = "not met through Redis: a check costs more with more tenants' keys in redis-server, or the machine's load moved the round trips (the ratio swung from 0.79 to 1.25 between runs at load 9-10)"
	}
	return res, nil
}
