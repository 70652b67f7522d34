package samlgw

import (
	"context"
	"strconv"
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
	return &acsGate{slots: make(chan struct{}, n), timeout: d}
}

// vacancy returns the busy refusal when every slot is taken, nil when
// one is free now (enter may still find none).
func (a *acsGate) vacancy() error {
	if len(a.slots) == cap(a.slots) {
		return a.busy()
	}
	return nil
}

func (a *acsGate) busy() error {
	return refuse(Busy, "the service provider is validating %d responses already; try again in %d s", cap(a.slots), retryAfter)
}

// enter takes a slot and returns the context of the work, bounded by the
// deadline, and the function that ends it; or an error when every slot is
// taken.
func (a *acsGate) enter(ctx context.Context) (context.Context, func(), error) {
	select {
	case a.slots <- struct{}{}:
	default:
		return nil, nil, a.busy()
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	return ctx, func() {
		cancel()
		<-a.slots
	}, nil
}

// retryAfterHeader is the header value of a saml-busy answer.
var retryAfterHeader = strconv.Itoa(retryAfter)
