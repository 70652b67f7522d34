package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/svc-dev/svc/wire"
)

// The chaos matrix's load generator: closed-loop callers, each sending
// one request at a time over gRPC Check or HTTP /check to the replicas,
// from a mix whose right answer is known for every request.

// chaosClass is one kind of request of the mix.
type chaosClass struct {
	name         string
	token        string
	method, path string
	// allow tells the right answer under the first policy (v1) and under
	// the bundle published during the run (v2).
	allowV1, allowV2 bool
	// metered: the tenant whose budget the matrix watches.
	metered bool
}

// chaosResult is one request's outcome.
type chaosResult struct {
	start, end time.Time
	replica    int
	class      int
	grpc       bool
	// failed: a transport error or a 5xx.
	failed  bool
	allowed bool
	reason  string
	err     string
	// retried: an HTTP request sent again on a new connection after the
	// server closed the kept-alive one it went out on.
	retried bool
	// decisionID is the answer's decision id (x-svc-decision-id, or
	// decision_id in a denial's body); empty when it carried none.
	decisionID string
}

// chaosTarget is one replica as the load sees it.
type chaosTarget struct {
	grpc *grpc.ClientConn
	http string // base URL
	// up is false from a transport error until the replica's /readyz
	// answers 200 again and its gRPC connection is ready: the callers
	// route around it, as a load balancer with health checks does.
	up atomic.Bool
}

type chaosLoad struct {
	classes []chaosClass
	targets []*chaosTarget
	client  *http.Client
	// fresh sends without keep-alive: the retry of a request whose kept-
	// alive connection the server closed.
	fresh *http.Client

	stop    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []chaosResult
	// decisions are the decision ids of every answer received; noID
	// counts the answers that carried none.
	decisions map[string]struct{}
	noID      int
}

func startChaosLoad(classes []chaosClass, targets []*chaosTarget, callers int) *chaosLoad {
	l := &chaosLoad{
		classes: classes, targets: targets, stop: make(chan struct{}), decisions: map[string]struct{}{},
		client: &http.Client{Timeout: rpcTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: callers}},
		fresh:  &http.Client{Timeout: rpcTimeout, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	for _, t := range targets {
		t.up.Store(true)
	}
	for i := 0; i < callers; i++ {
		l.wg.Add(1)
		go l.caller(i)
	}
	l.wg.Add(1)
	go l.health()
	return l
}

func (l *chaosLoad) caller(i int) {
	defer l.wg.Done()
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	useGRPC := i%2 == 0
	home := i % len(l.targets)
	var local []chaosResult
	ids := map[string]struct{}{}
	noID := 0
	defer func() {
		l.mu.Lock()
		l.results = append(l.results, local...)
		for id := range ids {
			l.decisions[id] = struct{}{}
		}
		l.noID += noID
		l.mu.Unlock()
	}()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		r := home
		for k := 0; k < len(l.targets) && !l.targets[r].up.Load(); k++ {
			r = (r + 1) % len(l.targets)
		}
		if !l.targets[r].up.Load() {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c := rng.IntN(len(l.classes))
		res := l.send(r, c, useGRPC)
		if res.failed && res.err != "" {
			l.targets[r].up.Store(false)
		}
		switch {
		case res.decisionID != "":
			ids[res.decisionID] = struct{}{}
		case res.err == "":
			noID++ // answered without a decision id
		}
		local = append(local, res)
	}
}

func (l *chaosLoad) send(r, c int, useGRPC bool) chaosResult {
	cl := l.classes[c]
	t := l.targets[r]
	res := chaosResult{start: time.Now(), replica: r, class: c, grpc: useGRPC}
	defer func() { res.end = time.Now() }()
	if useGRPC {
		headers := map[string]string{"user-agent": "chaos", "authorization": "Bearer " + cl.token}
		cr, err := doCheck(t.grpc, cl.method, cl.path, headers, nil)
		res.end = time.Now()
		if err != nil {
			res.failed, res.err = true, err.Error()
			return res
		}
		res.allowed = cr.status == http.StatusOK
		res.failed = cr.status >= 500
		res.decisionID = cr.headers["x-svc-decision-id"]
		if !res.allowed {
			d := denyBody(cr.body)
			res.reason = d.Reason
			if res.decisionID == "" {
				res.decisionID = d.DecisionID
			}
		}
		return res
	}
	req, _ := http.NewRequest(http.MethodGet, t.http+"/check", nil)
	req.Header.Set("X-Original-URI", cl.path)
	req.Header.Set("X_Svc_Method", cl.method)
	req.Header.Set("Authorization", "Bearer "+cl.token)
	resp, err := l.client.Do(req)
	if err != nil && closedKeepAlive(err) {
		// A draining sidecar closes its idle keep-alive connections; a
		// request already on its way over one meets EOF. The check is
		// idempotent and a client may send it again (RFC 9112 9.3.1), as
		// nginx does with a closed upstream keep-alive connection. Go's
		// transport retries once itself, onto another idle connection
		// that may be closing too: this retry takes a new one.
		res.retried = true
		resp, err = l.fresh.Do(req)
	}
	if err != nil {
		res.end = time.Now()
		res.failed, res.err = true, err.Error()
		return res
	}
	var body wire.DenyBody
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	res.end = time.Now()
	status := resp.StatusCode
	if s, err := strconv.Atoi(resp.Header.Get("X-Svc-Status")); err == nil {
		status = s
	}
	res.allowed = status == http.StatusOK
	res.failed = status >= 500
	res.reason = body.Reason
	res.decisionID = resp.Header.Get("X-Svc-Decision-Id")
	if res.decisionID == "" {
		res.decisionID = body.DecisionID
	}
	return res
}

func denyReason(body string) string { return denyBody(body).Reason }

func denyBody(body string) wire.DenyBody {
	var d wire.DenyBody
	_ = json.Unmarshal([]byte(body), &d)
	return d
}

// health marks a replica up again once its /readyz answers 200.
func (l *chaosLoad) health() {
	defer l.wg.Done()
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for {
		select {
		case <-l.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		for _, t := range l.targets {
			if t.up.Load() {
				continue
			}
			resp, err := probe.Get(t.http + "/readyz")
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				continue
			}
			// A gRPC connection that met a refused dial waits out its
			// reconnect backoff (up to minutes) and fails every call
			// meanwhile: redial now, and route to it once it is ready.
			if st := t.grpc.GetState(); st != connectivity.Ready {
				t.grpc.ResetConnectBackoff()
				t.grpc.Connect()
				continue
			}
			t.up.Store(true)
		}
	}
}

// finish stops the callers and returns every result in start order.
func (l *chaosLoad) finish() []chaosResult {
	close(l.stop)
	l.wg.Wait()
	sort.Slice(l.results, func(i, j int) bool { return l.results[i].start.Before(l.results[j].start) })
	return l.results
}

// p99 of the latencies of rs.
func p99(rs []chaosResult) time.Duration {
	if len(rs) == 0 {
		return 0
	}
	ds := make([]time.Duration, len(rs))
	for i, r := range rs {
		ds[i] = r.end.Sub(r.start)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[(len(ds)*99)/100]
}

// closedKeepAlive reports whether err is the server closing the kept-alive
// connection a request went out on (EOF or reset before any answer).
func closedKeepAlive(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)
}
