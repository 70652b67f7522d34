package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/wire"
)

func netDial(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) }

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// chaosFault is one row of the matrix.
type chaosFault struct {
	name string
	// inject starts the fault; heal ends it (nil: nothing to heal).
	inject, heal func()
	// during, when set, is checked at the end of the hold (what status
	// must show while the fault lasts); it returns a problem or "".
	during func() string
	// converged reports whether the fleet is back to normal; polled
	// after heal (or after inject when fromInject).
	converged  func() bool
	fromInject bool
	// bound is how long convergence may take, 0 for no bound.
	bound time.Duration
	// failOK: replica whose failures this row allows (-1: none).
	failOK int
	// budget is the most requests of the metered tenant the fleet may
	// let past the rate limit per budget while the fault is held (1:
	// one budget; 1+1/replicas when one replica limits on its own).
	budget float64

	// measured
	injected, healed, convergedAt, end time.Time
	problem                            string
}

// chaosRow is the measured outcome of a fault.
type chaosRow struct {
	name                    string
	requests, failed, wrong int
	failedElsewhere         int
	retried                 int
	p99                     time.Duration
	converge                time.Duration
	bound                   time.Duration
	metered, meteredBound   int
	meteredBudget           int
	budgetOK                bool
	problem                 string
}

// TestChaosMatrix runs a fleet of three sidecars under a closed-loop load
// whose right answers are known, injects one fault after another, and
// checks for each: no wrong decision, no failed request (except the
// killed replica's in flight), the metered tenant held to one budget
// across the fleet, and convergence after healing; then that every
// decision the load was answered with reached the decision log's stream
// once. -chaos.long holds each fault 20 s; -chaos.write writes the table
// (docs/reliability.md).
func TestChaosMatrix(t *testing.T) {
	hold := 2500 * time.Millisecond
	if *chaosLong {
		hold = 20 * time.Second
	}
	f := startChaosFleet(t)
	k := f.k

	// The v2 policy lets viewers create orders; v1 does not.
	v2dir := t.TempDir()
	harness.WriteFile(t, v2dir, "authz.rego", strings.Replace(readPolicy(t),
		`"viewer": {"*": {"read"}},`, `"viewer": {"*": {"read"}, "orders": {"create"}},`, 1))
	if !strings.Contains(readPolicy(t), `"viewer": {"*": {"read"}},`) {
		t.Fatal("policies/authz.rego no longer has the viewer line the v2 policy edits")
	}

	expired := harness.Claims("erin", "acme", "admin")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	expired["iat"] = time.Now().Add(-2 * time.Hour).Unix()
	classes := []chaosClass{
		{name: "acme viewer reads", token: k.token(t, "alice", "acme", "viewer"), method: "GET", path: "/orders/1", allowV1: true, allowV2: true},
		{name: "acme viewer creates", token: k.token(t, "victor", "acme", "viewer"), method: "POST", path: "/orders", allowV1: false, allowV2: true},
		{name: "acme editor deletes", token: k.token(t, "ed", "acme", "editor"), method: "DELETE", path: "/orders/1"},
		{name: "acme admin deletes", token: k.token(t, "ada", "acme", "admin"), method: "DELETE", path: "/orders/1", allowV1: true, allowV2: true},
		{name: "expired admin", token: k.rsa.Token(t, expired), method: "GET", path: "/orders/1"},
		{name: "globex admin (other tenant, metered)", token: k.token(t, "gus", "globex", "admin"), method: "GET", path: "/orders/1", metered: true},
		{name: "initech viewer (other tenant)", token: k.token(t, "ivy", "initech", "viewer"), method: "GET", path: "/orders/1"},
		{name: "bad signature", token: k.stranger.Token(t, harness.Claims("mallory", "acme", "admin")), method: "GET", path: "/orders/1"},
	}

	// v2Seen[i]: when replica i was first seen serving v2 (zero: not yet).
	var (
		v2mu        sync.Mutex
		v2Published time.Time
		v2Seen      = make([]time.Time, chaosReplicas)
	)
	servingV2 := func() bool {
		ok := true
		for i := range f.replicas {
			st, got := f.status(i)
			v2mu.Lock()
			if got && strings.HasPrefix(st.PolicyRevision, "v2") && v2Seen[i].IsZero() {
				v2Seen[i] = time.Now()
			}
			ok = ok && !v2Seen[i].IsZero()
			v2mu.Unlock()
		}
		return ok
	}
	notPartitioned := func() bool { return f.all(func(st wire.Status) bool { return !st.Partitioned && st.Ready }) }
	rateLimitShared := func() bool {
		return f.all(func(st wire.Status) bool { return st.RateLimit != nil && !st.RateLimit.Active })
	}
	// decisionsShipping: every replica connected to the sink, nothing
	// waiting longer than a batch takes under load.
	decisionsShipping := func() bool {
		return f.all(func(st wire.Status) bool {
			d := st.DecisionLog
			if d == nil || !d.Connected {
				return false
			}
			age, _ := time.ParseDuration(d.OldestUnsentAge)
			return d.OldestUnsentAge == "" || age < 3*time.Second
		})
	}
	rotated := harness.NewRSASigner(t, "rsa-2", 2048, "RS256")
	rotatedToken := rotated.Token(t, harness.Claims("rita", "acme", "viewer"))
	var samlProblem string
	var startedBefore [chaosReplicas]time.Time
	v2bundle := f.build(v2dir, "v2")

	faults := []*chaosFault{
		{name: "none (baseline)", failOK: -1, budget: 1},
		{name: "IdP JWKS endpoint down", failOK: -1, budget: 1,
			inject: func() { k.jwks.Fail(503) }, heal: func() { k.jwks.Fail(0) },
			during: func() string {
				if !f.all(func(st wire.Status) bool { return st.Partitioned && st.PartitionedSince != nil }) {
					return "a replica does not show partitioned with its since-time"
				}
				return ""
			},
			converged: notPartitioned, bound: chaosJWKSMax + time.Second},
		{name: "IdP key rotation (new kid)", failOK: -1, budget: 1, fromInject: true,
			inject: func() { k.jwks.Publish(k.rsa, k.ps, k.ec, k.weak, rotated) },
			converged: func() bool {
				for _, s := range f.replicas {
					r, err := doCheck(s.Conn(t), "GET", "/orders/1", map[string]string{"authorization": "Bearer " + rotatedToken}, nil)
					if err != nil || r.status != 200 {
						return false
					}
				}
				return true
			}, bound: chaosJWKSMax + time.Second},
		{name: "Redis killed", failOK: -1, budget: 1,
			inject: func() { f.redis.Signal(syscall.SIGKILL); <-f.redis.Done() },
			heal:   f.startRedis,
			during: func() string {
				if !f.all(func(st wire.Status) bool {
					return st.RateLimit != nil && st.RateLimit.Active && st.RateLimit.Mode == "local"
				}) {
					return "a replica does not show the local fallback in force"
				}
				return ""
			},
			converged: rateLimitShared},
		{name: "bundle server down", failOK: -1, budget: 1,
			inject: func() { f.nginx.Stop(t) },
			heal:   func() { f.nginx = harness.StartNginxStatic(t, f.served, f.bundleAt) },
			during: func() string {
				if !f.all(func(st wire.Status) bool {
					return st.Partitioned && st.PartitionedSince != nil && st.Status == "degraded"
				}) {
					return "a replica does not show partitioned (degraded) with its since-time"
				}
				return ""
			},
			converged: notPartitioned, bound: 2 * chaosBundlePoll},
		{name: "new signed bundle published", failOK: -1, budget: 1, fromInject: true,
			inject: func() {
				v2mu.Lock()
				v2Published = time.Now()
				v2mu.Unlock()
				f.serve(v2bundle)
			},
			converged: servingV2, bound: chaosBundlePoll + 500*time.Millisecond},
		{name: "restart / SIGHUP (changed config) / reload-policy", failOK: -1, budget: 1,
			inject: func() {
				for i := range f.replicas {
					st, _ := f.status(i)
					startedBefore[i] = st.StartedAt
				}
				var wg sync.WaitGroup
				wg.Add(3)
				go func() {
					defer wg.Done()
					if code, _, stderr := runCoreAt(t, f.replicas[0], "sidecar", "restart", "--drain-timeout", "10"); code != 0 {
						t.Errorf("core sidecar restart: exit %d: %s", code, stderr)
					}
				}()
				go func() {
					defer wg.Done()
					s := f.replicas[1]
					harness.WriteFile(t, s.Dir, "svc.toml", f.opts[1].Config+"\n[tenants.initech]\nplan = \"free\"\n")
					if err := s.Signal(syscall.SIGHUP); err != nil {
						t.Error(err)
					}
				}()
				go func() {
					defer wg.Done()
					if code, _, stderr := runCoreAt(t, f.replicas[2], "sidecar", "reload-policy", "--bundle", v2bundle); code != 0 {
						t.Errorf("core sidecar reload-policy: exit %d: %s", code, stderr)
					}
				}()
				wg.Wait()
			},
			converged: func() bool {
				st0, ok0 := f.status(0)
				st1, ok1 := f.status(1)
				return ok0 && ok1 && st0.StartedAt.After(startedBefore[0]) && st1.StartedAt.After(startedBefore[1]) &&
					f.all(func(st wire.Status) bool { return st.Ready && strings.HasPrefix(st.PolicyRevision, "v2") })
			}},
		{name: "one replica SIGKILLed, started again", failOK: 2, budget: 1,
			inject: func() {
				s := f.replicas[2]
				_ = s.Signal(syscall.SIGKILL)
				<-s.Done()
			},
			heal:      func() { f.launch(2) },
			converged: func() bool { return ready(f.replicas[2]) && f.targets[2].up.Load() }},
		{name: "SAML assertion posted to two replicas", failOK: -1, budget: 1,
			inject: func() {
				// The IdP's metadata may still be loading (503): retry.
				deadline := time.Now().Add(20 * time.Second)
				var ans idpAnswer
				var first *http.Response
				for {
					ans = askIdP(t, f.saml.idp.BaseURL+"/idp-initiated?user=bob")
					first = postACS(t, f.samlAddrs[0], ans)
					if first.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				if first.StatusCode != http.StatusSeeOther {
					samlProblem = fmt.Sprintf("first post answered %d %q, want 303", first.StatusCode, refusalCode(t, first))
					return
				}
				replay := postACS(t, f.samlAddrs[1], ans)
				if got := refusalCode(t, replay); replay.StatusCode != http.StatusUnauthorized || got != "saml-replayed" {
					samlProblem = fmt.Sprintf("the same assertion at a second replica answered %d %q, want 401 saml-replayed", replay.StatusCode, got)
				}
			},
			during: func() string { return samlProblem }},
		{name: "one replica cut off from Redis", failOK: -1, budget: 1 + 1.0/chaosReplicas,
			inject: func() { f.proxies[0].Cut() }, heal: func() { f.proxies[0].Heal() },
			during: func() string {
				st0, _ := f.status(0)
				st1, _ := f.status(1)
				if st0.RateLimit == nil || !st0.RateLimit.Active || st1.RateLimit == nil || st1.RateLimit.Active {
					return "the cut replica is not in fallback, or a connected one is"
				}
				return ""
			},
			converged: rateLimitShared},
		{name: "decision log sink (NATS) down", failOK: -1, budget: 1,
			inject: f.nats.Stop, heal: f.nats.Restart,
			during: func() string {
				// Each replica asked until it shows it, for a while: a
				// status request on a loaded machine can take longer than
				// the fleet's client waits for one.
				for i := range f.replicas {
					seen, ok := testkit.Await(10*time.Second, func() (bool, string) {
						st, ok := f.status(i)
						if !ok {
							return false, "no status"
						}
						d := st.DecisionLog
						return d != nil && !d.Connected && d.Unsent > 0 && d.Dropped == 0 &&
								st.Status == "degraded" && st.Reason == "decision-log-unavailable",
							fmt.Sprintf("status %q, reason %q, decision log %+v", st.Status, st.Reason, d)
					})
					if !ok {
						return fmt.Sprintf("replica %d does not show its decision log disconnected with records waiting (degraded, decision-log-unavailable): %s", i, seen)
					}
				}
				return ""
			},
			// The backlog of the outage ships while the load goes on, at
			// least as fast as decisions came: the longest backoff, then
			// no longer than the outage lasted.
			converged: decisionsShipping, bound: chaosShipBackoff + hold},
	}

	load := startChaosLoad(classes, f.targets, chaosCallers)
	time.Sleep(hold) // the baseline starts once the load runs
	for _, fl := range faults {
		fl.injected = time.Now()
		if fl.inject != nil {
			fl.inject()
		}
		// A change (rotation, publication) converges while it is held:
		// watch for it from the injection on.
		var watched chan time.Time
		if fl.fromInject && fl.converged != nil {
			watched = make(chan time.Time, 1)
			go func() {
				deadline := time.Now().Add(hold + 60*time.Second)
				for !fl.converged() && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				watched <- time.Now()
			}()
		}
		// The fault lasts a window of load on purpose: what the load
		// meets during it is what the row measures.
		time.Sleep(hold)
		if fl.during != nil {
			fl.problem = fl.during()
		}
		// The fault ends as healing begins: a Redis started again may
		// answer before heal returns.
		fl.healed = time.Now()
		if fl.heal != nil {
			fl.heal()
		}
		if watched != nil {
			fl.convergedAt = <-watched
			if !fl.converged() {
				fl.problem += " did not converge"
			}
		} else if fl.converged != nil {
			deadline := time.Now().Add(60 * time.Second)
			for !fl.converged() {
				if time.Now().After(deadline) {
					fl.problem += " did not converge within 60 s"
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		if watched == nil {
			fl.convergedAt = time.Now()
		}
		// A moment of steady state before the next fault.
		time.Sleep(hold / 5)
		fl.end = time.Now()
		t.Logf("%s: done", fl.name)
	}
	results := load.finish()
	dl := chaosDecisions(t, f, load)

	// wantAllow is the right answer of r, or false with known=false while
	// the replica may serve either policy.
	wantAllow := func(r chaosResult) (allow, known bool) {
		c := classes[r.class]
		if c.allowV1 == c.allowV2 {
			return c.allowV1, true
		}
		v2mu.Lock()
		defer v2mu.Unlock()
		switch {
		case v2Published.IsZero() || r.end.Before(v2Published):
			return c.allowV1, true
		case !v2Seen[r.replica].IsZero() && r.start.After(v2Seen[r.replica]):
			return c.allowV2, true
		}
		return false, false
	}

	var rows []chaosRow
	for _, fl := range faults {
		row := chaosRow{name: fl.name, problem: strings.TrimSpace(fl.problem), bound: fl.bound}
		var during []chaosResult
		meteredFrom, meteredTo := fl.injected, fl.healed
		for _, r := range results {
			// By the time the answer came: the in-flight requests a
			// fault breaks started before it.
			if r.end.Before(fl.injected) || !r.end.Before(fl.end) {
				continue
			}
			row.requests++
			if r.retried {
				row.retried++
			}
			if !r.start.After(fl.healed) {
				during = append(during, r)
			}
			if r.failed {
				row.failed++
				if r.replica != fl.failOK {
					row.failedElsewhere++
					if row.failedElsewhere <= 3 {
						t.Logf("%s: failed on replica %d (%s): %s %s", fl.name, r.replica, classes[r.class].name, r.reason, r.err)
					}
				}
				continue
			}
			if allow, known := wantAllow(r); known && allow != r.allowed {
				row.wrong++
				if row.wrong <= 3 {
					t.Logf("%s: wrong decision on replica %d for %q: allowed=%v reason %q", fl.name, r.replica, classes[r.class].name, r.allowed, r.reason)
				}
			}
			if classes[r.class].metered && !r.start.Before(meteredFrom) && r.start.Before(meteredTo) && r.reason != "rate-limited" {
				row.metered++
			}
		}
		row.p99 = p99(during)
		from := fl.healed
		if fl.fromInject {
			from = fl.injected
		}
		row.converge = fl.convergedAt.Sub(from)
		mins := meteredTo.Sub(meteredFrom).Minutes()
		row.meteredBudget = int(fl.budget * chaosBudget * (1 + mins))
		row.meteredBound = int(float64(row.meteredBudget)*1.05) + 1
		row.budgetOK = row.metered <= row.meteredBound
		rows = append(rows, row)
	}

	table := chaosTable(rows)
	fmt.Println(table)
	fmt.Println(dl.String())
	t.Log(dl.String())
	if *chaosWrite != "" {
		writeReliability(t, *chaosWrite, table, dl.String(), hold)
	}
	if dl.missing != 0 || dl.duplicates != 0 || dl.problem != "" {
		t.Errorf("decision log: %d answered decisions missing from the stream, %d in it more than once %s", dl.missing, dl.duplicates, dl.problem)
	}
	for _, r := range rows {
		if r.wrong != 0 {
			t.Errorf("%s: %d wrong decisions", r.name, r.wrong)
		}
		if r.failedElsewhere != 0 {
			t.Errorf("%s: %d failed requests where none may fail", r.name, r.failedElsewhere)
		}
		if !r.budgetOK {
			t.Errorf("%s: the metered tenant got %d requests past its limit, bound %d", r.name, r.metered, r.meteredBound)
		}
		if r.problem != "" {
			t.Errorf("%s: %s", r.name, r.problem)
		}
		if r.bound > 0 && r.converge > r.bound+5*time.Second {
			// Loaded machines stretch every bound (fetching, verifying and
			// compiling take CPU): a miss by more than 5 s fails, a smaller
			// one is only reported in the table.
			t.Errorf("%s: converged in %v, bound %v", r.name, r.converge, r.bound)
		}
	}
}

// chaosDelivery counts the decisions the load was answered against
// those the decision log delivered to the stream.
type chaosDelivery struct {
	answered, delivered, missing, duplicates int
	// stream: the records the stream holds; noID: answers without a
	// decision id.
	stream, noID int
	problem      string
}

func (d chaosDelivery) String() string {
	s := fmt.Sprintf("Decision log (NATS JetStream): answered %d, delivered %d, missing %d, duplicates %d", d.answered, d.delivered, d.missing, d.duplicates)
	if d.noID != 0 {
		s += fmt.Sprintf(" (%d answers carried no decision id)", d.noID)
	}
	return s + fmt.Sprintf(". The stream holds %d records in all.", d.stream)
}

// chaosDecisions waits until every replica has shipped its decision log
// (its own spool and those of the processes it replaced), then reads the
// stream: every decision id the load was answered with must be in it,
// and no decision id twice.
func chaosDecisions(t *testing.T, f *chaosFleet, load *chaosLoad) chaosDelivery {
	var d chaosDelivery
	shipped := func() bool {
		for i := range f.replicas {
			st, ok := f.status(i)
			if !ok || st.DecisionLog == nil || !st.DecisionLog.Connected || st.DecisionLog.Unsent != 0 {
				return false
			}
			if st.DecisionLog.Dropped != 0 {
				d.problem = fmt.Sprintf("(replica %d dropped %d records)", i, st.DecisionLog.Dropped)
			}
			// A process gone leaves its directory until it is shipped.
			if dirs, _ := filepath.Glob(filepath.Join(f.spools[i], "p-*")); len(dirs) != 1 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !shipped() {
		if time.Now().After(deadline) {
			d.problem += " (not every replica had shipped its spool within 3 min)"
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	var inStream map[string]int
	d.stream, inStream = f.nats.MsgIDs(t, "SVC_DECISIONS")
	d.answered, d.noID = len(load.decisions), load.noID
	for id := range load.decisions {
		if inStream[id] == 0 {
			d.missing++
			if d.missing <= 3 {
				t.Logf("decision %s answered, not in the stream", id)
			}
			continue
		}
		d.delivered++
	}
	for id, n := range inStream {
		if n > 1 {
			d.duplicates++
			if d.duplicates <= 3 {
				t.Logf("decision %s in the stream %d times", id, n)
			}
		}
	}
	return d
}

func chaosTable(rows []chaosRow) string {
	var b strings.Builder
	b.WriteString("| Fault | Requests | Failed | Wrong decisions | p99 during fault | Converged after healing | Metered tenant past its limit: got / budget | HTTP retried on a new connection |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		conv := r.converge.Round(time.Millisecond).String()
		if r.bound > 0 {
			conv += fmt.Sprintf(" (bound %v)", r.bound)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %v | %s | %d / %d | %d |\n", r.name, r.requests, r.failed, r.wrong,
			r.p99.Round(10*time.Microsecond), conv, r.metered, r.meteredBudget, r.retried)
	}
	return b.String()
}

func writeReliability(t *testing.T, path, table, decisions string, hold time.Duration) {
	var load string
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	page := fmt.Sprintf(`# Reliability: the fault matrix

What happens to a fleet of sidecars when things break while it serves. `+"`make chaos`"+` runs three
`+"`svc-sidecar`"+` replicas (fail closed, signed bundles polled from nginx, audit on, rate limits in one
`+"`redis-server`"+`, decision logs spooled and shipped to one `+"`nats-server`"+` with JetStream) under a
closed-loop load of %d callers (gRPC Check and HTTP `+"`/check`"+`, spread over the replicas) whose right
answer is known for every request: allowed and denied users of tenant acme, expired tokens, other
tenants' tokens (globex, rate-limited at %d requests a minute, is the metered tenant), bad
signatures. Each fault is held %v, then healed. This page is written by the command
(`+"`go test ./e2e/ -run TestChaosMatrix -chaos.long -chaos.write=...`"+`); the short version (faults held
2.5 s) runs in `+"`make test`"+`. Where each piece of state lives, and so why each row ends as it does:
[state.md](state.md).

Run: %s, %d CPUs, load average %s (the machine is shared: p99 figures are those of a loaded
host, not of the sidecar alone).

%s
%s

- **Requests**: answered from the fault's injection until the next fault. **Failed**: transport errors or
  5xx. **Wrong decisions**: an allow where a deny was due, or the reverse (while a replica may serve
  either the old or the new bundle, both answers count as right). **p99** over the time the fault was held.
- **Converged**: from healing (from injection for the key rotation and the bundle publication) until every
  replica shows the healthy state again (not partitioned, shared rate limits, the new key accepted, the
  new bundle served, the killed replica ready).
- **Metered tenant past its limit**: globex requests not refused as `+"`rate-limited`"+` by the whole fleet
  while the fault was held, against the budget for that time: one budget (a full bucket) plus its refill
  (one budget and one replica's share when one replica is cut off from Redis). The test fails above the
  budget plus 5 %%. Where Redis holds the bucket it is nearly spent when the fault begins, hence the
  low counts; where each replica falls back to its own share (Redis killed), the fleet together gets
  about one budget.
- **HTTP retried on a new connection**: `+"`/check`"+` requests that met EOF on a kept-alive connection
  the draining sidecar had just closed, and were sent again on a new connection as an HTTP client may
  (RFC 9112 §9.3.1; nginx does so with its upstream keep-alive connections). Their answers count above
  like any other; a retry that fails counts as failed.
- The SIGKILL row's failures are the killed process's in-flight requests; the load balancer of the load
  generator then routes around it until its `+"`/readyz`"+` answers again.
- **Decision log**: every decision id the load received in an answer (`+"`x-svc-decision-id`"+`, or
  `+"`decision_id`"+` in a denial), over all rows, against the stream `+"`SVC_DECISIONS`"+` read back once
  every replica shows `+"`decision_log.unsent`"+` 0 and no spool of a process gone is left. **Delivered**:
  in the stream; **missing**: answered but not in it; **duplicates**: decision ids the stream holds more
  than once. The test fails on any missing or duplicate. The stream holds more records than the load
  counted: decisions whose answer never reached a caller (the killed replica's in-flight requests) are
  logged too. While the sink is down, decisions are answered as usual and wait in each replica's spool
  (status `+"`degraded`"+`, `+"`decision-log-unavailable`"+`); the row converges once every replica is
  connected again and no record waits longer than 3 s, bounded by the shipper's longest backoff (10 s)
  plus the hold: the backlog must ship at least as fast as it grew, while the load goes on.
`, chaosCallers, chaosBudget, hold, time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), load, table, decisions)
	if !filepath.IsAbs(path) {
		path = filepath.Join(harness.ModuleRoot(t), path)
	}
	testkit.WriteFileMode(t, path, []byte(page), 0o644)
}
