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
		res.Why = "not met on this machine, though much nearer: the sidecar's own HTTP/1.1 front (sidecar/httpfront.go) now answers the checks without net/http, whose own work was 46 % of the sidecar's CPU per request. Alternating with the tree before the front in one sitting (2026-11-28), the CPU ratio went from 2.00 and 2.02 to 1.36 and 1.32 at load 8–11, and from 2.15 to 1.30 and 1.24 at load 0–3; the throughput ratio from 0.50 and 0.56 to 0.75 and 0.77, and from 0.55 to 0.78 and 0.82 (0.91–0.95 in two other runs of the day). A CPU profile of svc-sidecar under this load with the front (perf, 2026-11-28) splits its CPU per request into the kernel's TCP work of reading the request and writing the answer (about 22 %, which the no-op pays as well), the check (24 %: mapping, the token from the verified-token cache, the SHA-256 of the token that keys that cache, the policy from its decision cache, rate limit, audit record), the trace context and server span (7 %), exporting the sampled spans (7 %), the front's reading (9 %) and writing (7 %) of the request and answer, the scheduler (5 %), the audit log's writer (3.5 %) and GC (2 %). The check, spans and audit log alone come to about 17 µs per request, half the no-op's whole CPU per request (29–38 µs) where the bar leaves 4–6 µs: what remains is the decision's cost, not HTTP's. Meeting the bar would take a cheaper decision (no SHA-256 per request, no span started for a request the sampler drops) or a machine where the load generator and other work do not share the sidecar's two cores"
	}
	return res, nil
}
