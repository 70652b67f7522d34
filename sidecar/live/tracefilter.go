package live

import (
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

// Bounds of a trace filter's memory.
const (
	maxPendingTraces = 1024
	maxPendingSpans  = 64
	maxDecided       = 4096
	pendingTimeout   = 30 * time.Second
)

// traceFilter applies the span stream's trace-level filters (tenant,
// errors only): a trace is shown whole or not at all, although the span
// that decides it (auth.verify_token carries the tenant, a denying
// policy.evaluate the failure) is seldom the first to end. Spans of an
// undecided trace wait, bounded, until it is decided; a trace whose local
// root span ends undecided is dropped.
type traceFilter struct {
	tenant     string
	errorsOnly bool

	pending map[string]*pendingTrace
	decided map[string]bool
	order   []string // decided trace ids, oldest first
}

type pendingTrace struct {
	spans  []telemetry.SpanRecord
	first  time.Time
	tenant int8 // 0 unknown, 1 match, -1 mismatch
	failed bool
}

func newTraceFilter(tenant string, errorsOnly bool) *traceFilter {
	return &traceFilter{tenant: tenant, errorsOnly: errorsOnly,
		pending: map[string]*pendingTrace{}, decided: map[string]bool{}}
}

// add takes the next span and emits what is now known to pass.
func (f *traceFilter) add(sp telemetry.SpanRecord, emit func(any)) {
	if f.tenant == "" && !f.errorsOnly {
		emit(sp)
		return
	}
	if show, ok := f.decided[sp.TraceID]; ok {
		if show {
			emit(sp)
		}
		return
	}
	p := f.pending[sp.TraceID]
	if p == nil {
		if len(f.pending) >= maxPendingTraces {
			f.evictOldest()
		}
		p = &pendingTrace{first: time.Now()}
		f.pending[sp.TraceID] = p
	}
	if t, ok := sp.Attributes[engine.AttrTenant]; ok && f.tenant != "" && p.tenant == 0 {
		p.tenant = -1
		if t == f.tenant {
			p.tenant = 1
		}
	}
	if sp.Status == "error" || sp.Attributes[engine.AttrResult] == "deny" {
		p.failed = true
	}
	if len(p.spans) < maxPendingSpans {
		p.spans = append(p.spans, sp)
	}
	tenantOK := f.tenant == "" || p.tenant == 1
	failOK := !f.errorsOnly || p.failed
	switch {
	case p.tenant == -1:
		f.decide(sp.TraceID, false, nil)
	case tenantOK && failOK:
		f.decide(sp.TraceID, true, emit)
	case sp.ParentID == "" || sp.Kind == "server":
		// The local root ended and the trace still does not qualify.
		f.decide(sp.TraceID, false, nil)
	}
}

func (f *traceFilter) decide(id string, show bool, emit func(any)) {
	if p := f.pending[id]; p != nil && show {
		for _, sp := range p.spans {
			emit(sp)
		}
	}
	delete(f.pending, id)
	if len(f.order) >= maxDecided {
		delete(f.decided, f.order[0])
		f.order = f.order[1:]
	}
	f.decided[id] = show
	f.order = append(f.order, id)
}

func (f *traceFilter) evictOldest() {
	var oldest string
	var at time.Time
	for id, p := range f.pending {
		if oldest == "" || p.first.Before(at) {
			oldest, at = id, p.first
		}
	}
	delete(f.pending, oldest)
}

// expire drops traces that waited too long to be decided.
func (f *traceFilter) expire(now time.Time) {
	for id, p := range f.pending {
		if now.Sub(p.first) > pendingTimeout {
			delete(f.pending, id)
		}
	}
}
