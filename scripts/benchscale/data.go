package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/fixture"
	"github.com/svc-dev/svc/engine/policy"
)

// tablesPolicy decides with three tables of data.svc.tables, each read by
// key: the caller's tenant (its status and plan), the plan's actions and
// the caller's roles' grants. Every lookup is of a ground key, so its cost
// does not depend on how many entries a table has.
const tablesPolicy = `package svc.authz

default allow := false

allow if {
	tid := input.user.tenant_id
	input.resource.tenant == tid
	tenant := data.svc.tables.tenants[tid]
	tenant.status == "active"
	data.svc.tables.plans[tenant.plan].actions[input.action]
	[resource, verb] := split(input.action, ":")
	some role in input.user.roles
	verb in data.svc.tables.roles[role][resource]
}

deny_reasons := set() if {
	allow == true
} else := {"tenant-unknown"} if {
	not data.svc.tables.tenants[input.user.tenant_id]
} else := {"policy-denied"}
`

// tables are the generated data: each table's entries as JSON members
// ("key":{…}), in key order.
type tables struct {
	n                     int
	tenants, roles, plans [][]byte
	// lastTenant, its plan and lastRole make the benchmark's input: the
	// last keys of their tables.
	lastTenant, lastRole string
}

// genTables generates n entries in all: half tenants, a quarter roles,
// a quarter plans. Tenants carry a random digest (an API key's, say), so
// that the data compresses about as real data does.
func genTables(n int, seed uint64) *tables { return genTablesKeys(n, seed, 0) }

// genTablesKeys is genTables with keys random public keys of 64 bytes
// (base64) in every tenant entry, data that compresses little, as a
// bundle of client certificates' or API keys' material does.
func genTablesKeys(n int, seed uint64, keys int) *tables {
	rng := rand.New(rand.NewPCG(seed, 42))
	nt, nr := max(1, n/2), max(1, n/4)
	np := max(1, n-nt-nr)
	t := &tables{n: nt + nr + np}
	verbs := []string{"read", "create", "update", "delete", "export"}
	resources := []string{"orders", "invoices", "reports", "webhooks", "users"}
	for i := range np {
		var b bytes.Buffer
		fmt.Fprintf(&b, `"p%07d":{"actions":{"orders:read":true,"orders:update":true`, i)
		for _, r := range resources[1:] {
			for _, v := range verbs {
				if rng.IntN(3) == 0 {
					fmt.Fprintf(&b, `,"%s:%s":true`, r, v)
				}
			}
		}
		b.WriteString(`},"rank":` + strconv.Itoa(rng.IntN(3)) + `}`)
		t.plans = append(t.plans, b.Bytes())
	}
	for i := range nr {
		var b bytes.Buffer
		fmt.Fprintf(&b, `"r%07d":{"orders":["read","update"]`, i)
		for _, r := range resources[1:] {
			if rng.IntN(2) == 0 {
				fmt.Fprintf(&b, `,"%s":["%s"]`, r, verbs[rng.IntN(len(verbs))])
			}
		}
		b.WriteString(`}`)
		t.roles = append(t.roles, b.Bytes())
		t.lastRole = fmt.Sprintf("r%07d", i)
	}
	key := make([]byte, 64)
	for i := range nt {
		e := fmt.Appendf(nil, `"t%07d":{"plan":"p%07d","status":"active","region":"eu-%d","digest":"%016x%016x"`,
			i, rng.IntN(np), rng.IntN(9), rng.Uint64(), rng.Uint64())
		if keys > 0 {
			e = append(e, `,"keys":[`...)
			for k := range keys {
				for j := range key {
					key[j] = byte(rng.Uint32())
				}
				if k > 0 {
					e = append(e, ',')
				}
				e = append(e, '"')
				e = base64.StdEncoding.AppendEncode(e, key)
				e = append(e, '"')
			}
			e = append(e, ']')
		}
		t.tenants = append(t.tenants, append(e, '}'))
		t.lastTenant = fmt.Sprintf("t%07d", i)
	}
	return t
}

// files lays the tables out as data files of at most limit bytes each.
// A table too large for one file (svc/tables/<table>/data.json) is split,
// and its other parts go to the files of the levels above
// (svc/tables/data.json, svc/data.json), which bundles and policy
// directories merge into the same objects.
func (t *tables) files(limit int) (map[string][]byte, error) {
	type part struct {
		table   string
		members [][]byte
	}
	upper := []struct {
		path, pre, suf string
		parts          []part
		size           int
	}{
		{path: "svc/tables/data.json", pre: "{", suf: "}"},
		{path: "svc/data.json", pre: `{"tables":{`, suf: "}}"},
	}
	object := func(members [][]byte) []byte {
		b := []byte{'{'}
		for i, m := range members {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, m...)
		}
		return append(b, '}')
	}
	files := map[string][]byte{}
	for _, tb := range []part{{"tenants", t.tenants}, {"roles", t.roles}, {"plans", t.plans}} {
		size := 0
		for _, m := range tb.members {
			size += len(m) + 1
		}
		parts := size/(limit*9/10) + 1
		per := (len(tb.members) + parts - 1) / parts
		for p := range parts {
			members := tb.members[min(len(tb.members), p*per):min(len(tb.members), (p+1)*per)]
			if p == 0 {
				files["svc/tables/"+tb.table+"/data.json"] = object(members)
				continue
			}
			placed := false
			for i := range upper {
				if upper[i].size+size/parts+len(tb.table)+8 < limit {
					upper[i].parts = append(upper[i].parts, part{tb.table, members})
					upper[i].size += size/parts + len(tb.table) + 8
					placed = true
					break
				}
			}
			if !placed {
				return nil, fmt.Errorf("table %s: %d bytes do not fit the data files", tb.table, size)
			}
		}
	}
	for _, u := range upper {
		if len(u.parts) == 0 {
			continue
		}
		b := []byte(u.pre)
		for i, p := range u.parts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, fmt.Sprintf("%q:", p.table)...)
			b = append(b, object(p.members)...)
		}
		files[u.path] = append(b, u.suf...)
	}
	for name, b := range files {
		if len(b) > limit {
			return nil, fmt.Errorf("%s: %d bytes, more than %d", name, len(b), limit)
		}
	}
	return files, nil
}

// input asks to update an order as the last tenant's user holding the
// last role, which every table allows.
func (t *tables) input() ([]byte, string) {
	return fmt.Appendf(nil, `{"action":"orders:update","user":{"id":"u-1","role":"%[2]s","roles":["%[2]s"],"tenant_id":"%[1]s","claims":{}},`+
		`"resource":{"type":"orders","id":"o-1","tenant":"%[1]s"},"tenant":{"id":"%[1]s","plan":"team"}}`, t.lastTenant, t.lastRole), "update an order as tenant " + t.lastTenant
}

// heapInUse is the live heap after a collection.
func heapInUse() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc)
}

// evalBench times the set's decision on input, as serving does it
// without the decision cache.
func evalBench(set *policy.Set, raw []byte, m metrics) error {
	input, _, err := fixture.BenchInput("input", raw)
	if err != nil {
		return err
	}
	// About 3 s of evaluations, 30,000 at most.
	start := time.Now()
	for range 100 {
		if _, err := set.EvalValue(context.Background(), input); err != nil {
			return err
		}
	}
	per := time.Since(start) / 100
	iters := int(min(30000, max(300, 3*time.Second/max(per, 1))))
	res, err := fixture.Bench(context.Background(), set, input, fixture.BenchOptions{Iterations: iters, Warmup: iters / 10})
	if err != nil {
		return err
	}
	if !res.Decision.Allow {
		return fmt.Errorf("the benchmark's input is denied: %v", res.Decision.DenyReasons)
	}
	m["p50_us"] = us(res.P50)
	m["p99_us"] = us(res.P99)
	m["allocs"] = res.AllocsPerOp
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// tablesPoint generates the tables of a data point of arg entries, laid
// out in data files of at most bundle.MaxFileBytes beside the policy.
func tablesPoint(arg string) (int, *tables, map[string][]byte, error) {
	n, err := strconv.Atoi(arg)
	if err != nil {
		return 0, nil, nil, err
	}
	t := genTables(n, 1)
	files, err := t.files(bundle.MaxFileBytes)
	if err != nil {
		return 0, nil, nil, err
	}
	files["authz.rego"] = []byte(tablesPolicy)
	return n, t, files, nil
}

// pointData loads n entries of tables from a policy directory.
func pointData(arg string, _ *options) (metrics, error) {
	n, t, files, err := tablesPoint(arg)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "benchscale-data-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var bytesTotal int
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, err
		}
		bytesTotal += len(b)
	}
	raw, _ := t.input()
	t = nil
	heap0, rss0 := heapInUse(), procStatus("VmRSS")
	start := time.Now()
	set, err := policy.Load(dir)
	if err != nil {
		return nil, err
	}
	m := metrics{"entries": float64(n), "files": float64(len(files) - 1), "data_bytes": float64(bytesTotal)}
	m["load_s"] = time.Since(start).Seconds()
	m["heap_per_entry"] = (heapInUse() - heap0) / float64(n)
	m["rss_per_entry"] = (procStatus("VmRSS") - rss0) / float64(n)
	if err := evalBench(set, raw, m); err != nil {
		return nil, err
	}
	runtime.KeepAlive(set)
	return m, nil
}

// pointDataBundle loads n entries of tables from a signed bundle whose
// data is split into files of at most bundle.MaxFileBytes.
func pointDataBundle(arg string, _ *options) (metrics, error) {
	n, t, files, err := tablesPoint(arg)
	if err != nil {
		return nil, err
	}
	s, err := newSigner()
	if err != nil {
		return nil, err
	}
	archive, err := writeBundle(files, s, "data-"+arg)
	if err != nil {
		return nil, err
	}
	raw, _ := t.input()
	t, files = nil, nil
	heap0 := heapInUse()
	start := time.Now()
	set, err := bundle.Load(bytes.NewReader(archive), &bundle.VerifyOptions{PublicKeyPEM: s.pubPEM})
	if err != nil {
		return nil, err
	}
	m := metrics{"entries": float64(n), "archive_bytes": float64(len(archive))}
	m["load_s"] = time.Since(start).Seconds()
	m["heap_per_entry"] = (heapInUse() - heap0 - float64(len(archive))) / float64(n)
	if err := evalBench(set, raw, m); err != nil {
		return nil, err
	}
	runtime.KeepAlive(set)
	return m, nil
}

func runData(o *options) (result, error) {
	sizes := []int{100, 10_000, 1_000_000}
	if o.quick {
		sizes = []int{100, 1000, 10_000}
	}
	res := result{
		What:      "policy data: tenant, role and plan tables (1/2, 1/4, 1/4 of the entries) in data files, read by key; eval p50 without the decision cache; load time, live heap per entry",
		Bound:     fmt.Sprintf("eval p50 at %s entries ≤ 2× at %s, from files and from a signed bundle", count(sizes[2]), count(sizes[0])),
		CurveUnit: "eval p50 µs",
	}
	var (
		ms  []metrics
		fig string
	)
	for _, n := range sizes {
		m, err := measure("data", strconv.Itoa(n), o)
		if err != nil {
			return res, err
		}
		ms = append(ms, m)
		fig += fmt.Sprintf("%s: p50 %.1f µs, load %.2f s, %.0f B heap/entry (%d files); ", count(n), m["p50_us"], m["load_s"], m["heap_per_entry"], int(m["files"]))
		res.Curve = append(res.Curve, plotPoint{count(n) + " entries", m["p50_us"]})
	}
	b, err := measure("data-bundle", strconv.Itoa(sizes[2]), o)
	if err != nil {
		return res, err
	}
	fig += fmt.Sprintf("bundle of %s (%.1f MB): p50 %.1f µs, load %.2f s, %.0f B heap/entry", count(sizes[2]), b["archive_bytes"]/1e6, b["p50_us"], b["load_s"], b["heap_per_entry"])
	res.Curve = append(res.Curve, plotPoint{count(sizes[2]) + " (bundle)", b["p50_us"]})
	r1, r2 := ms[2]["p50_us"]/ms[0]["p50_us"], b["p50_us"]/ms[0]["p50_us"]
	res.Figures = fig + fmt.Sprintf("; ratio %s/%s: %.2f (files), %.2f (bundle)", count(sizes[2]), count(sizes[0]), r1, r2)
	res.Met = r1 <= 2 && r2 <= 2
	res.Why = "Every lookup is by key, so evaluation does not grow with the tables. Memory is OPA's in-memory store (AST values of the data; the set keeps no other copy of it); load time is decoding, converting and the collector marking a growing heap"
	if !res.Met {
		res.Why = "not met: a lookup that scans a table instead of reading a key; see the profile of `core policy bench` on the generated policy"
	}
	return res, nil
}
