// Package dryrun runs candidate policies against live traffic without
// enforcing them.
//
// A Session evaluates a candidate policy set on the input of every policy
// decision the sidecar makes while it runs, beside the enforced policy and
// off the request path: the decision only offers its input to a bounded
// queue, and a worker evaluates the candidate. When the queue is full the
// decision is counted as skipped, so that enforcement latency and outcomes
// never depend on the candidate. Every evaluation is written to the audit
// log with simulated: true and the candidate's revision, and counted: allow,
// simulated deny, errors, the deny reasons, and where the candidate differs
// from enforcement, by action and tenant. Each evaluation is cut off after
// Deps.EvalTimeout and counted in the report's timeouts, so a slow
// candidate costs the worker a bounded time per decision and overflows
// its queue (counted as skipped) rather than ever waiting on enforcement.
//
// A Manager holds the sessions; it is the sidecar's live.Session and costs
// a decision one atomic load while no session runs.
package dryrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// Limits and defaults of sessions.
const (
	DefaultQueueSize = wire.DryRunDefaultQueueSize
	MaxQueueSize     = wire.DryRunMaxQueueSize
	MaxDuration      = wire.DryRunMaxDuration
	// MaxSessions bounds the sessions running at once.
	MaxSessions = 4
	// keepFinished is how many finished sessions keep their report.
	keepFinished = 16
	// topReasons is how many deny reasons a report lists.
	topReasons = 10
	// DefaultEvalTimeout bounds one evaluation of the candidate.
	DefaultEvalTimeout = 50 * time.Millisecond
)

// Errors of Start.
var (
	ErrTooMany = errors.New("dry-run: too many sessions running")
	ErrOptions = errors.New("dry-run: invalid session options")
)

// Options of a session.
type Options struct {
	// Duration is how long the session runs; at most MaxDuration.
	Duration time.Duration
	// QueueSize bounds the decisions waiting for the candidate; default
	// DefaultQueueSize, at most MaxQueueSize.
	QueueSize int
}

// Deps are what a Manager writes to.
type Deps struct {
	// Audit receives one simulated record per evaluation; optional.
	Audit engine.AuditSink
	// Logger reports sessions starting and ending.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// EvalTimeout bounds each evaluation of a candidate; default
	// DefaultEvalTimeout (policy.dry_run_eval_timeout).
	EvalTimeout time.Duration
	// MaxCandidateBytes bounds an uploaded candidate bundle; default
	// DefaultMaxCandidateBytes (policy.bundle_max_bytes).
	MaxCandidateBytes int64
}

// Manager runs dry-run sessions. Its methods are safe for concurrent use.
type Manager struct {
	deps   Deps
	active atomic.Int32 // running sessions, read on every decision

	mu       sync.RWMutex
	running  map[string]*Session
	finished []*Session // newest last
	closed   bool
}

// NewManager returns a Manager with no session.
func NewManager(deps Deps) *Manager {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.MaxCandidateBytes <= 0 {
		deps.MaxCandidateBytes = DefaultMaxCandidateBytes
	}
	if deps.EvalTimeout <= 0 {
		deps.EvalTimeout = DefaultEvalTimeout
	}
	return &Manager{deps: deps, running: map[string]*Session{}}
}

// Active reports whether a session runs; it is one atomic load.
func (m *Manager) Active() bool { return m.active.Load() > 0 }

// Observe offers a decision to every running session. It never blocks:
// a session whose queue is full counts the decision as skipped.
func (m *Manager) Observe(ev engine.DecisionEvent) {
	if !ev.Evaluated {
		return // no policy decision: the token or the budget decided
	}
	m.mu.RLock()
	for _, s := range m.running {
		s.offer(ev)
	}
	m.mu.RUnlock()
}

// Start begins a session evaluating candidate. It ends by itself after
// opts.Duration, or on Stop.
func (m *Manager) Start(candidate *policy.Set, opts Options) (*Session, error) {
	if opts.QueueSize == 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Duration <= 0 || opts.Duration > MaxDuration {
		return nil, fmt.Errorf("%w: duration must be between 0 and %s, got %s", ErrOptions, MaxDuration, opts.Duration)
	}
	if opts.QueueSize < 1 || opts.QueueSize > MaxQueueSize {
		return nil, fmt.Errorf("%w: queue size must be between 1 and %d, got %d", ErrOptions, MaxQueueSize, opts.QueueSize)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("dry-run: the sidecar is shutting down")
	}
	if len(m.running) >= MaxSessions {
		return nil, fmt.Errorf("%w: %d running, at most %d", ErrTooMany, len(m.running), MaxSessions)
	}
	now := m.deps.Now()
	s := &Session{
		id:          policy.NewDecisionID(),
		revision:    candidate.Revision(),
		candidate:   candidate,
		started:     now,
		ends:        now.Add(opts.Duration),
		queue:       make(chan engine.DecisionEvent, opts.QueueSize),
		done:        make(chan struct{}),
		denyReasons: map[string]uint64{},
		changes:     map[change]uint64{},
		audit:       m.deps.Audit,
		now:         m.deps.Now,
		timeout:     m.deps.EvalTimeout,
	}
	s.timer = time.AfterFunc(opts.Duration, func() { m.Stop(s.id) })
	m.running[s.id] = s
	m.active.Add(1)
	go s.work()
	m.deps.Logger.Info("dry-run session started", "session", s.id, "revision", s.revision,
		"duration", opts.Duration.String(), "queue_size", opts.QueueSize)
	return s, nil
}

// Get returns the session with id, running or recently finished.
func (m *Manager) Get(id string) (*Session, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if s, ok := m.running[id]; ok {
		return s, true
	}
	for _, s := range m.finished {
		if s.id == id {
			return s, true
		}
	}
	return nil, false
}

// List returns the running and recently finished sessions, oldest first.
func (m *Manager) List() []*Session {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := append([]*Session(nil), m.finished...)
	for _, s := range m.running {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].started.Before(out[j].started) })
	return out
}

// Stop ends the session with id: no decision is offered to it any more,
// the decisions already queued are evaluated, and its report is final
// once Stop returns. Stopping a finished session is a no-op. It reports
// whether the session exists.
func (m *Manager) Stop(id string) (*Session, bool) {
	m.mu.Lock()
	s, ok := m.running[id]
	if ok {
		delete(m.running, id)
		m.active.Add(-1)
		s.timer.Stop()
		s.ended = m.deps.Now()
		// No offer is in flight: offers happen under the read lock.
		close(s.queue)
		m.finished = append(m.finished, s)
		if len(m.finished) > keepFinished {
			m.finished = m.finished[1:]
		}
	}
	m.mu.Unlock()
	if !ok {
		return m.Get(id)
	}
	<-s.done
	r := s.Report()
	m.deps.Logger.Info("dry-run session ended", "session", id, "revision", s.revision,
		"evaluated", r.Evaluated, "simulated_deny", r.SimulatedDeny, "errors", r.Errors, "timeouts", r.Timeouts, "skipped", r.Skipped)
	return s, true
}

// Close stops every session.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	ids := make([]string, 0, len(m.running))
	for id := range m.running {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.Stop(id)
	}
}

// change is one kind of difference between candidate and enforcement.
type change struct {
	newlyDenied    bool
	action, tenant string
}

// Session is one dry run of a candidate.
type Session struct {
	id, revision string
	candidate    *policy.Set
	started      time.Time
	ends         time.Time
	ended        time.Time // set by Stop under the manager's lock
	timer        *time.Timer
	queue        chan engine.DecisionEvent
	done         chan struct{}
	audit        engine.AuditSink
	now          func() time.Time
	timeout      time.Duration // of one evaluation

	decisions, allow, deny, errs, skipped, timeouts atomic.Uint64

	mu          sync.Mutex
	denyReasons map[string]uint64
	changes     map[change]uint64
}

// ID identifies the session.
func (s *Session) ID() string { return s.id }

// Done is closed when the session has finished and its report is final.
func (s *Session) Done() <-chan struct{} { return s.done }

func (s *Session) offer(ev engine.DecisionEvent) {
	s.decisions.Add(1)
	select {
	case s.queue <- ev:
	default:
		s.skipped.Add(1)
	}
}

// work evaluates the candidate on every queued decision until the queue
// is closed and drained.
func (s *Session) work() {
	defer close(s.done)
	ctx := context.Background()
	for ev := range s.queue {
		s.evaluate(ctx, ev)
	}
}

func (s *Session) evaluate(ctx context.Context, ev engine.DecisionEvent) {
	start := s.now()
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	res, err := s.candidate.Decide(ctx, ev.Input)
	overrun := err != nil && ctx.Err() != nil
	cancel()
	rec := ev.Record
	rec.Simulated = true
	rec.PolicyRevision = s.revision
	rec.Source = audit.SourceDryRun
	rec.LatencyUS = s.now().Sub(start).Microseconds()
	if err != nil {
		s.errs.Add(1)
		if overrun {
			s.timeouts.Add(1)
		}
		rec.Allow, rec.DenyReasons, rec.Reason = false, []string{}, string(reason.PolicyError)
		s.log(rec)
		return
	}
	rec.Allow, rec.DenyReasons = res.Allow, res.DenyReasons
	if rec.DenyReasons == nil {
		rec.DenyReasons = []string{}
	}
	rec.Reason = string(reason.PolicyDeny)
	if res.Allow {
		rec.Reason = string(reason.PolicyAllow)
		s.allow.Add(1)
	} else {
		s.deny.Add(1)
	}
	enforcedOK := ev.Record.Reason != string(reason.PolicyError)
	s.mu.Lock()
	if !res.Allow {
		for _, r := range res.DenyReasons {
			s.denyReasons[r]++
		}
	}
	if enforcedOK && res.Allow != ev.PolicyAllow {
		tenant := ev.Input.User.TenantID
		s.changes[change{newlyDenied: !res.Allow, action: ev.Input.Action, tenant: tenant}]++
	}
	s.mu.Unlock()
	s.log(rec)
}

func (s *Session) log(rec audit.Record) {
	if s.audit != nil {
		s.audit.Log(rec)
	}
}
