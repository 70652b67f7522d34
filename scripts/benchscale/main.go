// Command benchscale measures how svc's costs grow with the work: policy
// data, policy size, distinct tokens, tenants with budgets of their own,
// bundle size. Each row compares points of one axis measured in the same
// run (each point in a process of its own, so that its memory figures are
// its own) and checks the row's bound on their ratio.
//
//	go run ./scripts/benchscale                 # every row (make bench-scale)
//	go run ./scripts/benchscale -row data       # one row
//	go run ./scripts/benchscale -write docs/benchmarks.md
//	go run ./scripts/benchscale -row data -write docs/benchmarks.md  # that row's line and curve
//	go run ./scripts/benchscale -row tokens -tokens 200000 -heapprofile /tmp/heap  # heap profiles, cache full and end
//
// Every input is generated from fixed seeds, so a row measures the same
// work on every machine. -point runs one point in this process and prints
// its metrics as JSON; the rows run their points that way.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// metrics are the figures one point measured, by name.
type metrics map[string]float64

// result is what a row measured and concluded.
type result struct {
	// Row is the row's name (-row).
	Row string
	// What describes the work.
	What string
	// Figures is the measured curve, one line per point or figure.
	Figures string
	// Bound is the bar as written in the issue.
	Bound string
	// Met says whether the bound holds; Why explains a miss, or what a
	// row without a bar reports.
	Met bool
	Why string
	// Curve is the row's plot: a label and a value per point.
	Curve     []plotPoint
	CurveUnit string
}

type plotPoint struct {
	Label string
	Value float64
}

// row measures one axis.
type row struct {
	name string
	run  func(o *options) (result, error)
}

type options struct {
	tokens int // distinct tokens of the tokens row
	quick  bool
	// heapProfiles, when set, is a directory where the tokens row writes
	// heap profiles when the cache is full and at the end.
	heapProfiles string
}

var rows = []row{
	{"data", runData},
	{"policy-size", runPolicySize},
	{"tokens", runTokens},
	{"tenants", runTenants},
	{"bundles", runBundles},
	{"http-check", runHTTPCheck},
}

// points maps a point's kind to the function measuring it; the argument
// is the point's size.
var points = map[string]func(arg string, o *options) (metrics, error){
	"data":        pointData,
	"data-bundle": pointDataBundle,
	"policy-size": pointPolicySize,
	"tokens":      pointTokens,
	"decisions":   pointTenantDecisions,
	"bundle":      pointBundle,
}

func main() {
	var (
		only  = flag.String("row", "", "run only this row ("+rowNames()+")")
		point = flag.String("point", "", "measure one point, kind:size, and print its metrics as JSON")
		write = flag.String("write", "", "also write the table and the plot into this Markdown `file` (its bench-scale section)")
		o     options
	)
	flag.IntVar(&o.tokens, "tokens", 1_000_000, "distinct tokens the tokens row cycles through")
	flag.StringVar(&o.heapProfiles, "heapprofile", "", "write the tokens row's heap profiles (cache full, end) into this `directory`")
	flag.BoolVar(&o.quick, "quick", false, "smaller points, for trying the program out (the figures are not the rows')")
	flag.Parse()
	if o.quick {
		o.tokens = min(o.tokens, 20_000)
	}
	if o.heapProfiles != "" {
		// Finer than the default 512 KiB, so that profiles taken at two
		// moments can be compared allocation site by allocation site.
		runtime.MemProfileRate = 4096
	}
	if *point != "" {
		kind, arg, _ := strings.Cut(*point, ":")
		f, ok := points[kind]
		if !ok {
			fail(fmt.Errorf("unknown point kind %q", kind))
		}
		m, err := f(arg, &o)
		if err != nil {
			fail(err)
		}
		if err := json.NewEncoder(os.Stdout).Encode(m); err != nil {
			fail(err)
		}
		return
	}
	start := time.Now()
	var results []result
	ok := true
	for _, r := range rows {
		if *only != "" && r.name != *only {
			continue
		}
		t0 := time.Now()
		res, err := r.run(&o)
		if err != nil {
			res = result{Row: r.name, Why: "failed: " + err.Error()}
		}
		res.Row = r.name
		results = append(results, res)
		ok = ok && res.Met
		printResult(res, time.Since(t0))
	}
	if len(results) == 0 {
		fail(fmt.Errorf("no row named %q (rows: %s)", *only, rowNames()))
	}
	fmt.Printf("bench-scale: %d rows in %s, load average %s\n", len(results), time.Since(start).Round(time.Second), loadavg())
	if *write != "" && *only != "" {
		if err := writeDocRow(*write, results[0], o); err != nil {
			fail(err)
		}
		fmt.Printf("bench-scale: wrote the %s row of %s\n", *only, *write)
	} else if *write != "" {
		if err := writeDoc(*write, results, o); err != nil {
			fail(err)
		}
		fmt.Printf("bench-scale: wrote %s\n", *write)
	}
	_ = ok // a missed bound is reported by its row, not by the exit status
}

func rowNames() string {
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
	}
	return strings.Join(names, ", ")
}

func printResult(r result, took time.Duration) {
	verdict := "met"
	if !r.Met {
		verdict = "NOT MET"
	}
	if r.Bound == "" {
		verdict = "reported"
	}
	fmt.Printf("== %s (%s)\n   %s\n   %s\n", r.Row, took.Round(time.Second), r.What, r.Figures)
	if r.Bound != "" {
		fmt.Printf("   bound: %s: %s\n", r.Bound, verdict)
	}
	if r.Why != "" {
		fmt.Printf("   %s\n", r.Why)
	}
}

// measure runs one point in a child process (this program with -point)
// and returns its metrics.
func measure(kind, arg string, o *options, env ...string) (metrics, error) {
	args := []string{"-point", kind + ":" + arg, fmt.Sprintf("-tokens=%d", o.tokens)}
	if o.quick {
		args = append(args, "-quick")
	}
	if o.heapProfiles != "" {
		args = append(args, "-heapprofile", o.heapProfiles)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("point %s:%s: %w", kind, arg, err)
	}
	var m metrics
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		return nil, fmt.Errorf("point %s:%s: %w", kind, arg, err)
	}
	return m, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchscale:", err)
	os.Exit(1)
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ")
}

// procStatus reads a field of /proc/self/status in bytes (VmRSS, VmHWM).
func procStatus(field string) float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			return kb * 1024
		}
	}
	return 0
}

// count formats n as the rows name sizes: 100, 10k, 1M.
func count(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
