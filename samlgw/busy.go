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
	"github.com/svc-dev/svc/reason"
)

// acsGate bounds the ACS work. The ACS shares the process with the
// checks, and its clients are anyone on the internet, so a post over a
// bound is answered 503 saml-busy, never queued behind the flood (only
// a post that may be a real sign-on waits a little for a slot, in a
// short queue); and the bounds are drawn so that one client, or large
// documents, cannot spend what real sign-ons need:
//
//   - two lanes, each with acs_max_concurrent slots and a work budget of
//     its own: a post of at most SmallResponseBytes (a real IdP response)
//     goes in the small lane, any other in the large one, so a flood of
//     large documents never empties the small lane;
//   - a work budget and at most maxClientAdmitted posts under way per
//     client (clientOf), one of them large;
//   - a post that finds every slot of its lane taken waits for one, up
//     to slotWait, when it may be a real sign-on: in the small lane, or
//     with a genuine request cookie (one this gateway set at login for a
//     sign-on it started); a large document without one is refused at
//     once, as a flood's excess is;
//   - a post with a genuine request cookie is admitted ahead of one
//     without: a freed slot goes to it first, and it may spend the last
//     laneReserve of its lane's budget.
type acsGate struct {
	timeout time.Duration
	now     func() time.Time
	// wait is how long a post waits for a slot (slotWait, at most
	// timeout); measure starts measuring the work of a validation
	// (startWork).
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
	slots, used int
	budget      bucket
	// queues holds the posts waiting for a slot, first come first
	// served: those with a genuine request cookie, then the others. A
	// freed slot goes to the head of the first queue that has one.
	queues [2][]*slotWaiter
}

// slotWaiter is a post waiting for a slot; granted is closed when it has
// one.
type slotWaiter struct {
	granted chan struct{}
	done    bool // granted or given up; mu is held to read or write it
}

// queueOf is the queue of a post.
func queueOf(p post) int {
	if p.priority {
		return 0
	}
	return 1
}

// mayWait reports whether p waits for a slot of a full lane rather than
// being refused at once.
func mayWait(p post) bool { return p.priority || p.lane == smallLane }

// Admission of posts that may be real sign-ons.
const (
	// laneReserve is the share of a lane's burst that only posts with a
	// genuine request cookie may spend: a flood without cookies stops at
	// it. A quarter of a one-slot lane is 62 ms of work, 125 real
	// sign-ons.
	laneReserve = 0.25
	// slotWait is how long a post waits for a slot of its lane (at most
	// acs_timeout); a real response validates in about a millisecond, a
	// costly document at the bounds in under 100 ms.
	slotWait = 2 * time.Second
	// maxWaitingPerSlot bounds each queue of a lane.
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
	// reasonLaneFull: every slot of the lane is taken, and the post may
	// not wait for one (a large document without a request cookie), its
	// queue is full, or no slot came within slotWait.
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
	a := &acsGate{timeout: d, now: now, wait: min(slotWait, d), measure: startWork, clients: newClientTable(maxClients)}
	for i := range a.lanes {
		a.lanes[i] = laneState{slots: n, budget: newBucket(paceShare*float64(n), time.Duration(n)*paceBurst, now())}
	}
	return a
}

// post is what the gate knows of an ACS post before its body is read.
type post struct {
	client   netip.Prefix
	lane     lane
	priority bool // it carries a genuine request cookie
}

// busy is the saml-busy refusal of p for the bound why.
func busy(p post, why busyReason) error {
	msg := "the service provider is validating as many responses as it takes now; try again in %d s"
	switch why {
	case reasonClientBudget, reasonClientBusy:
		msg = "this client has posted more responses than the service provider validates for one client now; try again in %d s"
	}
	e := refuse(reason.SAMLBusy, msg, retryAfter)
	e.Err = &busyError{reason: why, lane: p.lane}
	return e
}

// check returns the refusal of p when a bound refuses it now, without
// taking anything; mu is held. A post that may wait for a slot is not
// refused for want of one while its queue has room.
func (a *acsGate) check(p post, c *clientState, now time.Time) error {
	l := &a.lanes[p.lane]
	switch {
	case !c.budget.above(now, 0):
		return busy(p, reasonClientBudget)
	case c.admitted >= maxClientAdmitted || (p.lane == largeLane && c.large > 0):
		return busy(p, reasonClientBusy)
	case !l.budget.above(now, a.floor(p)):
		return busy(p, reasonLaneBudget)
	case !l.free(p) && (!mayWait(p) || len(l.queues[queueOf(p)]) >= maxWaitingPerSlot*l.slots):
		return busy(p, reasonLaneFull)
	}
	return nil
}

// free reports whether p may take a slot now: one is free and no post
// that goes first waits for it.
func (l *laneState) free(p post) bool {
	for q := range queueOf(p) + 1 {
		if len(l.queues[q]) > 0 {
			return false
		}
	}
	return l.used < l.slots
}

// release frees a slot: it goes to the first waiting post, if any.
func (l *laneState) release() {
	for q := range l.queues {
		if len(l.queues[q]) > 0 {
			w := l.queues[q][0]
			l.queues[q] = l.queues[q][1:]
			w.done = true
			close(w.granted)
			return
		}
	}
	l.used--
}

// leave takes w out of its queue.
func (l *laneState) leave(q int, w *slotWaiter) {
	for i, o := range l.queues[q] {
		if o == w {
			l.queues[q] = append(l.queues[q][:i:i], l.queues[q][i+1:]...)
			return
		}
	}
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

// enter admits p: it takes a slot of p's lane (waiting for one up to
// slotWait when p may) and returns the context of the work, bounded by
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
	var w *slotWaiter
	if l.free(p) {
		l.used++
	} else {
		w = &slotWaiter{granted: make(chan struct{})}
		l.queues[queueOf(p)] = append(l.queues[queueOf(p)], w)
	}
	a.mu.Unlock()
	if w != nil {
		if err := a.waitSlot(ctx, p, l, c, w); err != nil {
			return nil, nil, err
		}
	}
	work := a.measure()
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	return ctx, func() {
		cancel()
		spent := work()
		a.mu.Lock()
		defer a.mu.Unlock()
		now := a.now()
		l.budget.spend(now, spent)
		c.budget.spend(now, spent)
		a.endAdmission(p, c)
		l.release()
	}, nil
}

// waitSlot waits for w, p's place in a queue of l, to be granted a slot;
// on a refusal it leaves the queue (or hands on the slot granted
// meanwhile) and ends p's admission.
func (a *acsGate) waitSlot(ctx context.Context, p post, l *laneState, c *clientState, w *slotWaiter) error {
	t := time.NewTimer(a.wait)
	defer t.Stop()
	var err error
	select {
	case <-w.granted:
	case <-t.C:
		err = busy(p, reasonLaneFull)
	case <-ctx.Done():
		err = inLane(p, ctxErr(ctx))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err == nil && !c.budget.above(a.now(), 0) {
		// The client spent its budget on others while this one waited.
		err = busy(p, reasonClientBudget)
	}
	if err == nil {
		return nil
	}
	if w.done {
		l.release()
	} else {
		w.done = true
		l.leave(queueOf(p), w)
	}
	a.endAdmission(p, c)
	return err
}

// endAdmission ends p's admission for its client; mu is held.
func (a *acsGate) endAdmission(p post, c *clientState) {
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
	if !errors.As(err, &e) || e.Code != reason.SAMLBusy || errors.As(err, &be) {
		return err
	}
	why := reasonClientGone
	if errors.Is(err, context.DeadlineExceeded) {
		why = reasonTimeout
	}
	return &Error{Code: reason.SAMLBusy, Msg: e.Msg, Err: &busyError{reason: why, lane: p.lane, err: e.Err}}
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
