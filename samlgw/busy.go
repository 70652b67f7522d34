package samlgw

import (
	"context"
	"strconv"
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
