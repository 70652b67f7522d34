package samlgw

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc-dev/svc/engine/config"
)

// acsGate bounds the ACS work: at most cap(slots) validations at once,
// each within timeout. The ACS shares the process with the checks, and
// its clients are anyone on the internet: a request over the bound is
// answered at once (503 saml-busy), never queued.
type acsGate struct {
	slots   chan struct{}
	timeout time.Duration
	// budget bounds the share of the CPU the validations take over time,
	// however short each one is.
	budget workBudget
	// lastLog (unix nanoseconds) and unlogged throttle the log lines of
	// saml-busy refusals.
	lastLog  atomic.Int64
	unlogged atomic.Int64
}

// busyLogEvery is the least time between two log lines of saml-busy.
const busyLogEvery = 10 * time.Second

// logTurn reports whether a saml-busy refusal at now gets a log line, and
// how many did not since the last one.
func (a *acsGate) logTurn(now time.Time) (int64, bool) {
	last := a.lastLog.Load()
	if now.UnixNano()-last < int64(busyLogEvery) || !a.lastLog.CompareAndSwap(last, now.UnixNano()) {
		a.unlogged.Add(1)
		return 0, false
	}
	return a.unlogged.Swap(0), true
}

// retryAfter is the Retry-After of a saml-busy answer, in seconds.
const retryAfter = 1

func newACSGate(s config.SAML) *acsGate {
	n := s.ACSMaxConcurrent
	if n <= 0 {
		n = config.DefaultSAMLACSMaxConcurrent()
	}
	d := s.ACSTimeout.Duration
	if d <= 0 {
		d = config.DefaultSAMLACSTimeout
	}
	return &acsGate{slots: make(chan struct{}, n), timeout: d, budget: newWorkBudget(n, time.Now)}
}

// vacancy returns the busy refusal when every slot is taken or the work
// budget is spent, nil when a validation may start now (enter may still
// find no slot).
func (a *acsGate) vacancy() error {
	if len(a.slots) == cap(a.slots) || !a.budget.available() {
		return a.busy()
	}
	return nil
}

func (a *acsGate) busy() error {
	return refuse(Busy, "the service provider is validating as many responses as it takes now; try again in %d s", retryAfter)
}

// enter takes a slot and returns the context of the work, bounded by the
// deadline, and the function that ends it; or an error when every slot is
// taken.
func (a *acsGate) enter(ctx context.Context) (context.Context, func(), error) {
	if !a.budget.available() {
		return nil, nil, a.busy()
	}
	select {
	case a.slots <- struct{}{}:
	default:
		return nil, nil, a.busy()
	}
	work := startWork()
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	return ctx, func() {
		cancel()
		a.budget.spend(work())
		<-a.slots
	}, nil
}

// Pacing of the ACS work. Each slot may keep a CPU busy a paceShare of
// the time on average, with bursts of up to paceBurst of work: a real
// response validates in about 0.5 ms, so a slot sustains about 100
// sign-ons a second and bursts of 500 pass untouched, while a flood of
// costly documents (25-100 ms each at the bounds) is answered saml-busy
// once the burst is spent and the checks keep the CPU
// (BenchmarkCheckUnderACSFlood: Check p99 4.4 ms under an 80 posts/s flood
// without pacing, 3.0 ms at a quarter of a CPU, 1.6 ms at a twentieth,
// 0.65 ms quiet; what remains is the flood's own HTTP traffic). The work
// charged is the validating thread's CPU time (startWork), so a slow
// replay store does not throttle real sign-ons.
const (
	paceShare = 0.05
	paceBurst = 250 * time.Millisecond
)

// workBudget is a token bucket of work time: spend charges what a
// validation took; the credit grows back at paceShare per slot of wall
// time, up to paceBurst per slot; no new validation starts while it is
// spent.
type workBudget struct {
	mu     sync.Mutex
	now    func() time.Time
	rate   float64 // credit per second of wall time, in seconds
	burst  time.Duration
	credit time.Duration
	at     time.Time
}

func newWorkBudget(slots int, now func() time.Time) workBudget {
	burst := time.Duration(slots) * paceBurst
	return workBudget{now: now, rate: paceShare * float64(slots), burst: burst, credit: burst, at: now()}
}

// refill adds the credit earned since the last call; mu is held.
func (b *workBudget) refill() {
	now := b.now()
	if d := now.Sub(b.at); d > 0 {
		b.credit = min(b.burst, b.credit+time.Duration(float64(d)*b.rate))
	}
	b.at = now
}

// available reports whether the credit is positive.
func (b *workBudget) available() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	return b.credit > 0
}

// spend charges d of work.
func (b *workBudget) spend(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	b.credit -= d
}

// retryAfterHeader is the header value of a saml-busy answer.
var retryAfterHeader = strconv.Itoa(retryAfter)
