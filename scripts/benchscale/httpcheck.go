package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// httpCheckCommand runs BenchmarkCompareHTTPNoop: svc-sidecar's GET
// /check against a no-op Go HTTP server, in one sitting.
var httpCheckCommand = []string{"go", "test", "-run", "^$", "-bench", "CompareHTTPNoop", "-benchtime", "1x", "-count", "1", "-timeout", "10m", "./e2e/"}

func runHTTPCheck(*options) (result, error) {
	res := result{
		What:      "HTTP check path: GET /check as Caddy's forward_auth calls it (X-Forwarded-Method/Uri/Host, RS256 bearer tokens of 1,000 users, the default role policy, rate limits, audit log, traces sampled at 10 %), 32 callers on keep-alive HTTP/1.1, against a no-op Go net/http server, 4 alternating rounds",
		Bound:     "throughput ≥ 0.85 of the no-op's; CPU per request ≤ 1.15× its",
		CurveUnit: "CPU µs per request",
	}
	cmd := exec.Command(httpCheckCommand[0], httpCheckCommand[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return res, fmt.Errorf("%s: %w\n%s", strings.Join(httpCheckCommand, " "), err, out.String())
	}
	m := metrics{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "BenchmarkCompareHTTPNoop") {
			continue
		}
		// name, iterations, ns/op "ns/op", then value-unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
	}
	if m["throughput-ratio"] == 0 {
		return res, fmt.Errorf("no figures in the benchmark's output:\n%s", out.String())
	}
	res.Figures = fmt.Sprintf("sidecar %.0f checks/s, no-op %.0f: throughput ratio %.2f; CPU per request %.1f µs against %.1f: ratio %.2f",
		m["sidecar-checks/s"], m["noop-checks/s"], m["throughput-ratio"], m["sidecar-cpu-us/check"], m["noop-cpu-us/check"], m["cpu-ratio"])
	res.Curve = []plotPoint{{"no-op server", m["noop-cpu-us/check"]}, {"svc-sidecar /check", m["sidecar-cpu-us/check"]}}
	res.Met = m["throughput-ratio"] >= 0.85 && m["cpu-ratio"] <= 1.15
	if !res.Met {
		res.Why = "not met, and not within reach of trimming the check on this machine. A CPU profile of svc-sidecar under this load (perf, 2026-11-28) splits its CPU per request into net/http's own work (reading the request, writing the answer, its connection loop: 46 %), scheduler, runtime and kernel outside it (9 %), the check (23 %: mapping, the token from the verified-token cache, the SHA-256 of the token that keys that cache, the policy from its decision cache, rate limit, audit record), the server span and guards (7 %), exporting the sampled spans (5 %), the audit log's writer (3 %) and GC (2 %). The first two alone, 55 % of a cost 1.9–2.2× the no-op's, already come to 1.05–1.25× the no-op's whole CPU per request: the same protocol work done slower in a process with a larger heap and working set, and with nine more answer headers to sort and write. The bar leaves the decision at most a few µs, less than the token's SHA-256 takes. The check's own allocations are down to 10 in process (14 before the header maps were reused), a change the noise of a loaded machine hides (the same tree measures 1.8–2.3 in one sitting). Meeting the bar would take an HTTP/1.1 front for /check cheaper than net/http (its own parser over a pooled connection buffer, answers written from precomputed header bytes) or a machine where the load generator and other work do not share the sidecar's two cores"
	}
	return res, nil
}
