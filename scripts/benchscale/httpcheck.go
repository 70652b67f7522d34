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
	res.Why = "not met in this run: " + httpCheckHistory
	if res.Met {
		res.Why = "met in this run, though not in every run on this shared machine: " + httpCheckHistory
	}
	return res, nil
}

// httpCheckHistory is what the row's runs have shown, met or not.
const httpCheckHistory = "the sidecar's own HTTP/1.1 front (sidecar/httpfront.go) answers the checks without net/http, " +
	"and the decision has since been made cheaper: the verified-token cache is keyed by BLAKE2b-256 instead of SHA-256 " +
	"(1.1 µs against 2.5–3.5 µs for the benchmark's RS256 token on this CPU without the SHA extensions; 6.8 % of the sidecar's CPU became 2.4 %), " +
	"the front writes an answer's header in one append, reusing the previous answer's sorted names (6.7 % → 3.2–3.8 %), " +
	"a check's header map starts as a single group of eight, the OTLP exporter no longer sizes each request before gRPC sizes it again (1.4 %), " +
	"and only Envoy's answers list the client's x-svc-* headers (0.7 %). " +
	"Alternating with the tree before these in one sitting (2026-11-28, eleven pairs, load 1.3–8.4), the CPU ratio went from a median of 1.28 " +
	"(1.05–1.52) to 1.13 (1.05–1.25; at most 1.15 in eight of eleven) and the throughput ratio from 0.76 (0.62–1.14) to 0.84 (0.75–0.89; " +
	"at least 0.85 in two of eleven). A CPU profile of svc-sidecar after them (perf, 2026-11-28) leaves, besides the work the no-op does too " +
	"(the kernel's TCP, the scheduler, reading and writing the connection), the decision in the engine (about 20 %: the policy decision cache's key 3 %, " +
	"the token from its cache 5 %, audit record and metrics 3 %), the front's reading of the request (9 %), exporting the sampled spans (6–9 %: " +
	"OTLP conversion and protobuf marshalling), the server span started for every request (3.4 %: the sampler and trace ids, which the audit record " +
	"names even for a request the sampler drops, so its span context cannot be left out) and the audit log's writer (3–4 %), each a few per cent. " +
	"Meeting the bar in every run would take cuts across all of them or cores the load generator and other work do not share"
