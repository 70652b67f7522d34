package engine

import (
	"context"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/otelhist"
	"github.com/svc-dev/svc/reason"
)

// Span and attribute names; they are part of the observable contract.
const (
	SpanVerifyToken = "auth.verify_token"
	SpanEvaluate    = "policy.evaluate"

	AttrTenant      = "svc.tenant"
	AttrAction      = "svc.action"
	AttrResult      = "svc.result"
	AttrReason      = "svc.reason"
	AttrDenyReasons = "svc.deny_reasons"
	AttrDecisionID  = "svc.decision_id"
	AttrRevision    = "svc.policy_revision"
	AttrMatchedRule = "svc.matched_rule"
	// AttrResource is the resource of the intent, "type/id".
	AttrResource = "svc.resource"
	// AttrInput is the policy input as JSON, claims redacted (see
	// RedactedInput); set only while a live watcher observes decisions.
	AttrInput = "svc.input"
	// AttrIdentityKind is the kind of credential a verified caller
	// presented (TokenDecision.Kind), on the auth.verify_token span.
	AttrIdentityKind = "svc.identity.kind"
)

const instrumentationName = "github.com/svc-dev/svc/engine"

type instruments struct {
	tracer trace.Tracer
	// internal holds the start options of the engine's spans, made once:
	// an option built per span is an allocation on every check.
	internal []trace.SpanStartOption
	// decisions is svc.decisions, observed from each decisionOptions'
	// count: an atomic add costs a check far less than the SDK's
	// synchronous counter would.
	decisions metric.Int64ObservableCounter
	// latency is svc.decision.duration: in hist, a histogram of the
	// provider's otelhist.Registry, when it has one; else the SDK's
	// instrument.
	latency metric.Float64Histogram
	hist    *otelhist.Histogram
	// bound holds the options of each decisionKey seen so far, made
	// once: the key space is the reason codes of the engine, a small
	// fixed set, times allowed or not.
	bound sync.Map // decisionKey → *decisionOptions
	// dropped is what startVerify and startEval return in place of a
	// span that would not be recorded.
	dropped trace.Span
	// untraced is true when the tracer provider is OpenTelemetry's
	// no-op one (the C ABI's without an OTLP endpoint): no span is
	// started, since a no-op span costs a context and ends nowhere; the
	// caller's own span, if any, stays in the context.
	untraced bool
}

// decisionOptions are the measurement options of one decisionKey, as
// slices: passing an option on its own to Add or Record makes a slice of
// it on every call.
type decisionOptions struct {
	n       atomic.Int64 // decisions made with this key
	observe []metric.ObserveOption
	record  []metric.RecordOption
	// latency is the key's series of instruments.hist, nil without.
	latency *otelhist.Series
}

// Name, description, unit and buckets of svc.decision.duration.
const (
	metricLatency     = "svc.decision.duration"
	metricLatencyDesc = "Time to reach a decision, token verification included."
)

var latencyBuckets = []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05}

type decisionKey struct {
	allowed bool
	code    reason.Code
}

func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider, e *Engine) (*instruments, error) {
	m := mp.Meter(instrumentationName)
	t := &instruments{
		tracer:   tp.Tracer(instrumentationName),
		internal: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)},
		dropped:  noop.Span{},
	}
	_, t.untraced = tp.(noop.TracerProvider)
	var err error
	if t.decisions, err = m.Int64ObservableCounter("svc.decisions",
		metric.WithDescription("Authorization decisions by result and reason.")); err != nil {
		return nil, err
	}
	if _, err = m.RegisterCallback(t.observeDecisions, t.decisions); err != nil {
		return nil, err
	}
	// The histogram is recorded on every decision: in the provider's
	// otelhist.Registry when it has one, exported as the SDK's
	// instrument would be, for a fraction of its cost.
	if reg := otelhist.From(mp); reg != nil {
		t.hist = reg.Histogram(otelhist.Scope{Name: instrumentationName}, metricLatency, metricLatencyDesc, "s", latencyBuckets)
	} else if t.latency, err = m.Float64Histogram(metricLatency, metric.WithUnit("s"),
		metric.WithDescription(metricLatencyDesc),
		metric.WithExplicitBucketBoundaries(latencyBuckets...)); err != nil {
		return nil, err
	}
	hit := metric.WithAttributes(attribute.String("outcome", "hit"))
	miss := metric.WithAttributes(attribute.String("outcome", "miss"))
	if err := observeDecisionCache(m, e, hit, miss); err != nil {
		return nil, err
	}
	if err := observeRateLimitFallback(m, e); err != nil {
		return nil, err
	}
	if err := observeAPIKeys(m, e); err != nil {
		return nil, err
	}
	if err := observeDecisionLog(m, e); err != nil {
		return nil, err
	}
	if err := observeClientCerts(m, e); err != nil {
		return nil, err
	}
	if err := observeIntrospection(m, e); err != nil {
		return nil, err
	}
	if len(e.providers) == 0 {
		return t, nil
	}
	return t, observeProviders(m, e, hit, miss)
}

// observeProviders reports each identity provider's JWKS, with its iss as
// the issuer attribute (empty for sdk.jwks_url without jwt.issuer), and
// the verified-token caches of them all.
func observeProviders(m metric.Meter, e *Engine, hit, miss metric.ObserveOption) error {
	refreshes, err := m.Int64ObservableCounter("svc.jwks.fetches", metric.WithDescription("JWKS fetches by issuer and outcome."))
	if err != nil {
		return err
	}
	keyAge, err := m.Float64ObservableGauge("svc.jwks.key_age", metric.WithUnit("s"),
		metric.WithDescription("Time since the issuer's JWKS was last fetched successfully."))
	if err != nil {
		return err
	}
	keys, err := m.Int64ObservableGauge("svc.jwks.keys", metric.WithDescription("Usable keys in the issuer's cached JWKS."))
	if err != nil {
		return err
	}
	lookups, err := m.Int64ObservableCounter("svc.token_cache.lookups",
		metric.WithDescription("Verified-token cache lookups by outcome (hit skips the signature check)."))
	if err != nil {
		return err
	}
	cached, err := m.Int64ObservableGauge("svc.token_cache.entries", metric.WithDescription("Verified tokens cached."))
	if err != nil {
		return err
	}
	type attrs struct{ issuer, ok, failed metric.ObserveOption }
	per := make([]attrs, len(e.providers))
	for i, p := range e.providers {
		is := attribute.String("issuer", p.iss)
		per[i] = attrs{
			issuer: metric.WithAttributes(is),
			ok:     metric.WithAttributes(is, attribute.String("outcome", "ok")),
			failed: metric.WithAttributes(is, attribute.String("outcome", "error")),
		}
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		var hits, misses, entries uint64
		for i, p := range e.providers {
			s := p.keys.Status()
			o.ObserveInt64(refreshes, int64(s.Fetches-s.FetchFailures), per[i].ok)
			o.ObserveInt64(refreshes, int64(s.FetchFailures), per[i].failed)
			o.ObserveInt64(keys, int64(s.Keys), per[i].issuer)
			if !s.LastSuccess.IsZero() {
				o.ObserveFloat64(keyAge, e.now().Sub(s.LastSuccess).Seconds(), per[i].issuer)
			}
			cs := p.verifier.CacheStats()
			hits, misses, entries = hits+cs.Hits, misses+cs.Misses, entries+uint64(cs.Entries)
		}
		o.ObserveInt64(lookups, int64(hits), hit)
		o.ObserveInt64(lookups, int64(misses), miss)
		o.ObserveInt64(cached, int64(entries))
		return nil
	}, refreshes, keyAge, keys, lookups, cached)
	return err
}

// observeAPIKeys reports the keys in force from api_keys.file and the
// changes of the file refused (the previous keys stayed in force).
func observeAPIKeys(m metric.Meter, e *Engine) error {
	if e.apiKeyFile == nil {
		return nil
	}
	keys, err := m.Int64ObservableGauge("svc.api_keys.keys", metric.WithDescription("API keys in force from api_keys.file."))
	if err != nil {
		return err
	}
	refusals, err := m.Int64ObservableCounter("svc.api_keys.refusals",
		metric.WithDescription("Changes of api_keys.file refused; the previous keys stayed in force."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := e.apiKeyFile.Status()
		o.ObserveInt64(keys, int64(s.Keys))
		o.ObserveInt64(refusals, s.Refusals)
		return nil
	}, keys, refusals)
	return err
}

// observeDecisionLog reports the decision log's shipping: records the
// sink acknowledged, failed sends, records a full spool dropped unsent,
// records the spool refused (their decisions answered
// decision-log-unavailable), and the backlog (records, bytes, age of the
// oldest).
func observeDecisionLog(m metric.Meter, e *Engine) error {
	if e.decisions == nil {
		return nil
	}
	shipped, err := m.Int64ObservableCounter("svc.decision_log.shipped",
		metric.WithDescription("Decision records the decision log's sink acknowledged."))
	if err != nil {
		return err
	}
	retries, err := m.Int64ObservableCounter("svc.decision_log.retries",
		metric.WithDescription("Failed sends to the decision log's sink; the records were sent again."))
	if err != nil {
		return err
	}
	dropped, err := m.Int64ObservableCounter("svc.decision_log.dropped",
		metric.WithDescription("Decision records a full spool deleted unsent (decision_log.overflow = drop_oldest)."))
	if err != nil {
		return err
	}
	refused, err := m.Int64ObservableCounter("svc.decision_log.refused",
		metric.WithDescription("Decisions answered decision-log-unavailable because the spool could not take their records (full under decision_log.overflow = deny, or not writable)."))
	if err != nil {
		return err
	}
	unsent, err := m.Int64ObservableGauge("svc.decision_log.unsent",
		metric.WithDescription("Decision records waiting in the spool for the sink."))
	if err != nil {
		return err
	}
	spoolBytes, err := m.Int64ObservableGauge("svc.decision_log.spool_bytes", metric.WithUnit("By"),
		metric.WithDescription("Size of the decision log's spool on disk."))
	if err != nil {
		return err
	}
	age, err := m.Float64ObservableGauge("svc.decision_log.oldest_unsent_age", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest record waiting for the sink has waited; 0 when none waits."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := e.decisions.Stats()
		o.ObserveInt64(shipped, st.Shipped)
		o.ObserveInt64(retries, st.Retries)
		o.ObserveInt64(dropped, st.Dropped)
		o.ObserveInt64(refused, st.Refused)
		o.ObserveInt64(unsent, st.Unsent)
		o.ObserveInt64(spoolBytes, st.SpoolBytes)
		o.ObserveFloat64(age, st.OldestUnsentAge.Seconds())
		return nil
	}, shipped, retries, dropped, refused, unsent, spoolBytes, age)
	return err
}

// observeIntrospection reports the calls to the introspection endpoint
// by outcome (active, inactive, unavailable, invalid), the answers served
// by each cache tier (memory, redis; stale: past cache_ttl because the
// endpoint failed), the size of the in-process cache, and the values of
// the shared tier refused by their MAC.
func observeIntrospection(m metric.Meter, e *Engine) error {
	if e.introspector == nil {
		return nil
	}
	calls, err := m.Int64ObservableCounter("svc.introspection.calls",
		metric.WithDescription("Calls to the introspection endpoint by outcome."))
	if err != nil {
		return err
	}
	hits, err := m.Int64ObservableCounter("svc.introspection.cache_hits",
		metric.WithDescription("Introspection answers served without a call, by cache tier."))
	if err != nil {
		return err
	}
	cached, err := m.Int64ObservableGauge("svc.introspection.cache_entries",
		metric.WithDescription("Introspection answers cached in process."))
	if err != nil {
		return err
	}
	rejected, err := m.Int64ObservableCounter("svc.introspection.cache_rejected",
		metric.WithDescription("Values of the shared introspection cache ignored because their MAC did not verify."))
	if err != nil {
		return err
	}
	attr := func(k, v string) metric.ObserveOption { return metric.WithAttributes(attribute.String(k, v)) }
	active, inactive, unavailable, invalid := attr("outcome", "active"), attr("outcome", "inactive"),
		attr("outcome", "unavailable"), attr("outcome", "invalid")
	memory, remote, stale := attr("tier", "memory"), attr("tier", "redis"), attr("tier", "stale")
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := e.introspector.Stats()
		o.ObserveInt64(calls, int64(s.Active), active)
		o.ObserveInt64(calls, int64(s.Inactive), inactive)
		o.ObserveInt64(calls, int64(s.Unavailable), unavailable)
		o.ObserveInt64(calls, int64(s.Invalid), invalid)
		o.ObserveInt64(hits, int64(s.MemoryHits), memory)
		o.ObserveInt64(hits, int64(s.RemoteHits), remote)
		o.ObserveInt64(hits, int64(s.StaleHits), stale)
		o.ObserveInt64(cached, int64(s.Entries))
		o.ObserveInt64(rejected, int64(s.RemoteRejected))
		return nil
	}, calls, hits, cached, rejected)
	return err
}

// observeDecisionCache reports the decision cache of the active policy
// set. The cache lives in the set, so its counts restart when a policy is
// activated, as a counter's do when a process restarts.
func observeDecisionCache(m metric.Meter, e *Engine, hit, miss metric.ObserveOption) error {
	lookups, err := m.Int64ObservableCounter("svc.decision_cache.lookups",
		metric.WithDescription("Decision cache lookups of the active policy by outcome (hit skips evaluation)."))
	if err != nil {
		return err
	}
	cached, err := m.Int64ObservableGauge("svc.decision_cache.entries",
		metric.WithDescription("Decisions cached for the active policy."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		set := e.policies.Load()
		if set == nil {
			return nil
		}
		hits, misses, entries, enabled := set.CacheStats()
		if !enabled {
			return nil
		}
		o.ObserveInt64(lookups, int64(hits), hit)
		o.ObserveInt64(lookups, int64(misses), miss)
		o.ObserveInt64(cached, int64(entries))
		return nil
	}, lookups, cached)
	return err
}

// startVerify starts the auth.verify_token span, unless its parent was
// dropped (see parentDropped) or nothing is traced.
func (t *instruments) startVerify(ctx context.Context) (context.Context, trace.Span) {
	if t.untraced || parentDropped(ctx) {
		return ctx, t.dropped
	}
	return t.tracer.Start(ctx, SpanVerifyToken, t.internal...)
}

// parentDropped reports whether the span in ctx is one of this process
// that the sampler dropped: it is valid, local, not recording and not
// sampled. Its children would be dropped too by every sampler that
// follows the parent (the parent-based ones, OpenTelemetry's default)
// and by the trace id ratio, which decides the same for the whole trace,
// so they are not started: starting a span the SDK drops still costs a
// span and a context. A remote parent (the caller's traceparent) or none
// leaves the decision to the sampler.
func parentDropped(ctx context.Context) bool {
	p := trace.SpanFromContext(ctx)
	sc := p.SpanContext()
	return sc.IsValid() && !sc.IsRemote() && !sc.IsSampled() && !p.IsRecording()
}

func (t *instruments) endVerify(_ context.Context, span trace.Span, d TokenDecision) {
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(AttrResult, result(d.Allowed)),
			attribute.String(AttrReason, string(d.Reason)),
		)
		if d.TenantID != "" {
			span.SetAttributes(attribute.String(AttrTenant, d.TenantID))
		}
		if d.Kind != "" {
			span.SetAttributes(attribute.String(AttrIdentityKind, d.Kind))
		}
	}
	span.End()
}

// startEval starts the policy.evaluate span, unless its parent was
// dropped (see parentDropped) or nothing is traced.
func (t *instruments) startEval(ctx context.Context) (context.Context, trace.Span) {
	if t.untraced || parentDropped(ctx) {
		return ctx, t.dropped
	}
	return t.tracer.Start(ctx, SpanEvaluate, t.internal...)
}

func (t *instruments) endEval(_ context.Context, span trace.Span, in Input, d Decision, err error, withInput bool) {
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(AttrTenant, in.User.TenantID),
			// Copies: a recorded span waits in the export queue, and the
			// action and resource may share the memory of the whole
			// request they were mapped from, which it would keep alive.
			attribute.String(AttrAction, strings.Clone(in.Action)),
			attribute.String(AttrResource, strings.Clone(resourceName(in.Resource))),
			attribute.String(AttrResult, result(d.Allow)),
			attribute.String(AttrReason, string(d.Reason)),
			attribute.StringSlice(AttrDenyReasons, d.DenyReasons),
			attribute.String(AttrDecisionID, d.DecisionID),
			attribute.String(AttrRevision, d.Revision),
			attribute.String(AttrMatchedRule, matchedRule(d)),
		)
		if err != nil {
			span.SetStatus(codes.Error, string(reason.PolicyError))
		}
		if withInput {
			span.SetAttributes(attribute.String(AttrInput, string(RedactedInput(in))))
		}
	}
	span.End()
}

// resourceName is "type/id", "type" or "" for the span's intent.
func resourceName(r policy.Resource) string {
	if r.ID == "" {
		return r.Type
	}
	return r.Type + "/" + r.ID
}

// matchedRule names the rule of svc.authz that decided: allow when it
// held, deny_reasons when a reason was given, else the default of allow.
func matchedRule(d Decision) string {
	switch {
	case d.Allow:
		return "data.svc.authz.allow"
	case len(d.DenyReasons) > 0:
		return "data.svc.authz.deny_reasons"
	default:
		return "data.svc.authz.allow (default)"
	}
}

func (t *instruments) decided(ctx context.Context, code reason.Code, allowed bool, latency time.Duration) {
	k := decisionKey{allowed: allowed, code: code}
	v, ok := t.bound.Load(k)
	if !ok {
		attrs := attribute.NewSet(
			attribute.String("result", result(allowed)),
			attribute.String("reason", string(code)),
		)
		set := metric.WithAttributeSet(attrs)
		o := &decisionOptions{
			observe: []metric.ObserveOption{set},
			record:  []metric.RecordOption{set},
		}
		if t.hist != nil {
			o.latency = t.hist.Bind(attrs)
		}
		v, _ = t.bound.LoadOrStore(k, o)
	}
	o := v.(*decisionOptions)
	o.n.Add(1)
	if o.latency != nil {
		o.latency.Record(ctx, latency.Seconds())
		return
	}
	t.latency.Record(ctx, latency.Seconds(), o.record...)
}

// observeDecisions reports svc.decisions: the count of each decision key
// seen so far.
func (t *instruments) observeDecisions(_ context.Context, obs metric.Observer) error {
	t.bound.Range(func(_, v any) bool {
		o := v.(*decisionOptions)
		obs.ObserveInt64(t.decisions, o.n.Load(), o.observe...)
		return true
	})
	return nil
}

func result(allowed bool) string {
	if allowed {
		return "allow"
	}
	return "deny"
}

func traceIDs(ctx context.Context) (traceID, spanID string) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return "", ""
	}
	// Both in one string: every audited decision carries them.
	tid, sid := sc.TraceID(), sc.SpanID()
	var buf [2*len(tid) + 2*len(sid)]byte
	hex.Encode(buf[:2*len(tid)], tid[:])
	hex.Encode(buf[2*len(tid):], sid[:])
	ids := string(buf[:])
	return ids[:2*len(tid)], ids[2*len(tid):]
}

// observeRateLimitFallback reports which rate-limit mode is in force when
// budgets live in Redis: svc.rate_limit.fallback.active is 1 while Redis
// is unreachable and rate_limit.redis_fallback decides (attribute mode),
// svc.rate_limit.fallback.decisions counts the requests it decided.
func observeRateLimitFallback(m metric.Meter, e *Engine) error {
	active, err := m.Int64ObservableGauge("svc.rate_limit.fallback.active",
		metric.WithDescription("1 while Redis is unreachable and rate_limit.redis_fallback limits requests, by mode."))
	if err != nil {
		return err
	}
	decisions, err := m.Int64ObservableCounter("svc.rate_limit.fallback.decisions",
		metric.WithDescription("Requests whose rate limit the fallback mode decided because Redis was unreachable."))
	if err != nil {
		return err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		fb := e.fallback.Load()
		if fb == nil {
			return nil
		}
		s := fb.Status()
		mode := metric.WithAttributes(attribute.String("mode", string(s.Mode)))
		var v int64
		if s.Active {
			v = 1
		}
		o.ObserveInt64(active, v, mode)
		o.ObserveInt64(decisions, s.Fallbacks, mode)
		return nil
	}, active, decisions)
	return err
}
