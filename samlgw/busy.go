package samlgw

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc-dev/svc/engine/config"
)

// acsGate bounds the ACS work. The ACS shares the process with the
// checks, and its clients are anyone on the internet, so a post over a
// bound is answered at once (503 saml-busy), never queued behind the
// flood; and the bounds are drawn so that one client, or large documents,
// cannot spend what real sign-ons need:
//
//   - two lanes, each with acs_max_concurrent slots and a work budget of
//     its own: a post of at most SmallResponseBytes (a real IdP response)
//     goes in the small lane, any other in the large one, so a flood of
//     large documents never empties the small lane;
//   - a work budget and at most maxClientAdmitted posts under way per
//     client (clientOf), one of them large;
//   - a post that carries a genuine request cookie (one this gateway set
//     at login for a sign-on it started) is admitted ahead of one that
//     does not: it may spend the last laneReserve of its lane's budget,
//     and wait up to priorityWait for a slot of its lane where the other
//     is refused.
type acsGate struct {
	timeout time.Duration
	now     func() time.Time
	// wait is how long a priority post waits for a slot (priorityWait,
	// at most timeout); measure starts measuring the work of a
	// validation (startWork).
	wait    time.Duration
	measure func() func() time.Duration

	mu      sync.Mutex
	lanes   [2]laneState
	clients *clientTable

	// lastLog (unix nanoseconds) and unlogged throttle the log lines of
	// saml-busy refusals.
	lastLog  atomic.Int64
	unlogged atomic.Int64
}

// SmallResponseBytes is the largest ACS post (its Content-Length) of the
// small lane. A real IdP response is a few kilobytes to a few tens (an
// encrypted assertion with certificates and a hundred group claims is
// about 30 KB of XML, 45 KB of form); 64 KiB of form holds about 46 KB of
// XML. A post without a Content-Length goes in the large lane.
const SmallResponseBytes = 64 << 10

// lane is one of the ACS's two lanes.
type lane int

const (
	smallLane lane = iota
	largeLane
)

func (l lane) String() string {
	if l == smallLane {
		return "small"
	}
	return "large"
}

// laneOf returns the lane of a post of contentLength bytes (-1 unknown).
func laneOf(contentLength int64) lane {
	if contentLength >= 0 && contentLength <= SmallResponseBytes {
		return smallLane
	}
	return largeLane
}

// laneState is the slots and work budget of one lane.
type laneState struct {
	slots  chan struct{}
	budget bucket
	// waiting counts the priority posts waiting for a slot; while one
	// waits, no other post takes a freed slot before it.
	waiting int
}

// Admission of priority posts (a genuine request cookie).
const (
	// laneReserve is the share of a lane's burst that only priority posts
	// may spend: a flood without cookies stops at it. A quarter of a
	// one-slot lane is 62 ms of work, 125 real sign-ons.
	laneReserve = 0.25
	// priorityWait is how long a priority post waits for a slot of its
	// lane (at most acs_timeout); a validation takes about a millisecond,
	// a costly document at the bounds under 100 ms.
	priorityWait = 2 * time.Second
	// maxWaitingPerSlot bounds the priority posts waiting for a slot.
	maxWaitingPerSlot = 8
)

// maxClientAdmitted is how many posts of one client may be under way at
// once (waiting for a slot or validating); at most one of them large. A
// browser posts one response per sign-on.
const maxClientAdmitted = 2

// busyReason says which bound refused a post saml-busy: the reason label
// of the svc.saml.acs.busy metric.
type busyReason string

const (
	// reasonClientBudget: the client's work budget is spent.
	reasonClientBudget busyReason = "client-budget"
	// reasonClientBusy: the client has maxClientAdmitted posts (or a large
	// one, for a large post) under way.
	reasonClientBusy busyReason = "client-busy"
	// reasonLaneBudget: the lane's work budget is spent (down to the
	// reserve, for a post without a genuine request cookie).
	reasonLaneBudget busyReason = "lane-budget"
	// reasonLaneFull: every slot of the lane is taken (and, for a priority
	// post, none freed within priorityWait).
	reasonLaneFull busyReason = "lane-full"
	// reasonTimeout: the validation did not end within acs_timeout.
	reasonTimeout busyReason = "timeout"
	// reasonClientGone: the client left before its response was
	// validated.
	reasonClientGone busyReason = "client-gone"
)

// busyError is the cause of a saml-busy refusal: which bound, in which
// lane.
type busyError struct {
	reason busyReason
	lane   lane
	err    error // the context's error, for timeout and client-gone
}

func (e *busyError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("%s in the %s lane: %v", e.reason, e.lane, e.err)
	}
	return fmt.Sprintf("%s in the %s lane", e.reason, e.lane)
}

func (e *busyError) Unwrap() error { return e.err }

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

// retryAfterHeader is the header value of a saml-busy answer.
var retryAfterHeader = strconv.Itoa(retryAfter)

func newACSGate(s config.SAML, now func() time.Time) *acsGate {
	n := s.ACSMaxConcurrent
	if n <= 0 {
		n = config.DefaultSAMLACSMaxConcurrent()
	}
	d := s.ACSTimeout.Duration
	if d <= 0 {
		d = config.DefaultSAMLACSTimeout
	}
	a := &acsGate{timeout: d, now: now, wait: min(priorityWait, d), measure: startWork, clients: newClientTable(maxClients)}
	for i := range a.lanes {
		a.lanes[i] = laneState{
			slots:  make(chan struct{}, n),
			budget: newBucket(paceShare*float64(n), time.Duration(n)*paceBurst, now()),
		}
	}
	return a
}

// post is what the gate knows of an ACS post before its body is read.
type post struct {
	client   netip.Prefix
	lane     lane
	priority bool // it carries a genuine request cookie
}

// busy is the saml-busy refusal of p for reason.
func busy(p post, reason busyReason) error {
	msg := "the service provider is validating as many responses as it takes now; try again in %d s"
	switch reason {
	case reasonClientBudget, reasonClientBusy:
		msg = "this client has posted more responses than the service provider validates for one client now; try again in %d s"
	}
	e := refuse(Busy, msg, retryAfter)
	e.Err = &busyError{reason: reason, lane: p.lane}
	return e
}

// check returns the refusal of p when a bound refuses it now, without
// taking anything; mu is held. A priority post is not refused for want of
// a slot: it may wait for one.
func (a *acsGate) check(p post, c *clientState, now time.Time) error {
	l := &a.lanes[p.lane]
	switch {
	case !c.budget.above(now, 0):
		return busy(p, reasonClientBudget)
	case c.admitted >= maxClientAdmitted || (p.lane == largeLane && c.large > 0):
		return busy(p, reasonClientBusy)
	case !l.budget.above(now, a.floor(p)):
		return busy(p, reasonLaneBudget)
	case !p.priority && (l.waiting > 0 || len(l.slots) == cap(l.slots)):
		return busy(p, reasonLaneFull)
	case p.priority && len(l.slots) == cap(l.slots) && l.waiting >= maxWaitingPerSlot*cap(l.slots):
		return busy(p, reasonLaneFull)
	}
	return nil
}

// floor is the lane credit p needs more than.
func (a *acsGate) floor(p post) time.Duration {
	if p.priority {
		return 0
	}
	return time.Duration(laneReserve * float64(a.lanes[p.lane].budget.burst))
}

// vacancy returns the busy refusal of p when a bound refuses it now, nil
// when a validation may start (enter may still refuse it). The ACS asks
// before reading the body: a flood's excess costs no reading, decoding or
// parsing.
func (a *acsGate) vacancy(p post) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	return a.check(p, a.clients.get(p.client, now), now)
}

// enter admits p: it takes a slot of p's lane (a priority post waits for
// one up to priorityWait) and returns the context of the work, bounded by
// acs_timeout, and the function that ends it and charges its CPU time to
// the lane and the client; or the busy refusal.
func (a *acsGate) enter(ctx context.Context, p post) (context.Context, func(), error) {
	a.mu.Lock()
	now := a.now()
	c := a.clients.get(p.client, now)
	if err := a.check(p, c, now); err != nil {
		a.mu.Unlock()
		return nil, nil, err
	}
	l := &a.lanes[p.lane]
	c.admitted++
	if p.lane == largeLane {
		c.large++
	}
	var got bool
	select {
	case l.slots <- struct{}{}:
		got = true
	default:
		l.waiting++
	}
	a.mu.Unlock()
	if !got {
		err := a.waitSlot(ctx, p, l)
		a.mu.Lock()
		l.waiting--
		if err == nil && !c.budget.above(a.now(), 0) {
			// The client spent its budget on others while this one waited.
			<-l.slots
			err = busy(p, reasonClientBudget)
		}
		if err != nil {
			a.release(p, c)
			a.mu.Unlock()
			return nil, nil, err
		}
		a.mu.Unlock()
	}
	work := a.measure()
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	return ctx, func() {
		cancel()
		spent := work()
		a.mu.Lock()
		now := a.now()
		l.budget.spend(now, spent)
		c.budget.spend(now, spent)
		a.release(p, c)
		a.mu.Unlock()
		<-l.slots
	}, nil
}

// waitSlot waits for a slot of l for the priority post p.
func (a *acsGate) waitSlot(ctx context.Context, p post, l *laneState) error {
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-t.C:
		return busy(p, reasonLaneFull)
	case <-ctx.Done():
		return inLane(p, ctxErr(ctx))
	}
}

// release ends p's admission for its client; mu is held.
func (a *acsGate) release(p post, c *clientState) {
	c.admitted--
	if p.lane == largeLane {
		c.large--
	}
}

// inLane returns err, a saml-busy refusal of work whose context ended
// (ctxErr), with its cause recorded for the metric: timeout or
// client-gone, in p's lane. Any other error is returned as it is.
func inLane(p post, err error) error {
	var e *Error
	var be *busyError
	if !errors.As(err, &e) || e.Code != Busy || errors.As(err, &be) {
		return err
	}
	reason := reasonClientGone
	if errors.Is(err, context.DeadlineExceeded) {
		reason = reasonTimeout
	}
	return &Error{Code: Busy, Msg: e.Msg, Err: &busyError{reason: reason, lane: p.lane, err: e.Err}}
}

// busyCause returns the bound and the lane of a saml-busy refusal.
func busyCause(err error) (busyReason, string) {
	var be *busyError
	if errors.As(err, &be) {
		return be.reason, be.lane.String()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return reasonTimeout, ""
	}
	return reasonClientGone, ""
}
