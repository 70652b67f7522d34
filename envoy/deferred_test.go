package envoy

import (
	"context"
	"slices"
	"sync"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
)

// inputObserver records the request of every decision's input while on.
type inputObserver struct {
	mu   sync.Mutex
	on   bool
	reqs []policy.Request
}

func (o *inputObserver) Observing() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.on
}

func (o *inputObserver) ObserveDecision(_ context.Context, ev engine.DecisionEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var r policy.Request
	if ev.Input.Request != nil {
		r = *ev.Input.Request
	}
	o.reqs = append(o.reqs, r)
}

func (o *inputObserver) set(on bool) []policy.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.on = on
	out := o.reqs
	o.reqs = nil
	return out
}

// deferredPolicies read input.request.headers and input.request.query in
// every way a policy can (or not at all): the engine must build them
// exactly when the active set can observe them.
var deferredPolicies = map[string]string{
	"neither": `allow if input.action == "orders:read"`,
	"a header": `allow if input.request.headers["x-team"] == "blue"
deny_reasons contains "team" if not allow`,
	"the query":    `allow if input.request.query.mode == "ro"`,
	"all headers":  `allow if count(input.request.headers) > 3`,
	"the request":  `allow if { r := input.request; r.headers["x-team"] == "blue"; r.query.mode == "ro" }`,
	"whole input":  `allow if { x := input; x.request.query.mode == "ro" }`,
	"not cachable": `allow if { time.now_ns() > 0; input.request.headers["x-team"] == "blue" }`,
	"other parts":  `allow if { input.request.method == "GET"; input.request.path != "/x"; input.request.host != "" }`,
}

// TestCheckDeferredRequestParts: an allowed or denied Check on the engine,
// whose request headers and query are built only when the active policy
// set (or an observer) can read them, gives the same answer, audit
// decision and observed input as the same Check through an Authorizer
// that gets them built up front, for policies that read them and
// policies that do not, swapped in turn on one engine.
func TestCheckDeferredRequestParts(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp, config.FailClosed)
	cfg.RateLimit.Disabled = true
	obs := &inputObserver{}
	e, sink := auditedEngine(t, idp, cfg, engine.Deps{Observer: obs})
	deferred := newTestServer(t, cfg, e)
	upfront := newTestServer(t, cfg, plainAuthorizer{e})
	tok := idp.token(t, map[string]any{"sub": "u-1", "tenant_id": testTenant, "roles": []string{"viewer"}})
	var reqs []*authv3.CheckRequest
	for _, target := range []string{"/api/orders/42", "/api/orders/42?mode=ro", "/api/orders?mode=rw&mode=ro", "/api/orders/1?mode=r%6F&x=a+b", "/api/orders/1?;bad=1&mode=ro"} {
		for _, h := range []map[string]string{
			{"authorization": "Bearer " + tok},
			{"authorization": "Bearer " + tok, "x-team": "blue", "accept": "*/*", "user-agent": "t", "x-forwarded-for": "10.0.0.1"},
			{"authorization": "Bearer " + tok, "x-team": "red", "cookie": "a=b"},
			{"authorization": "Bearer bad.token.here", "x-team": "blue"},
		} {
			reqs = append(reqs, checkReq("GET", target, h, nil))
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range deferredPolicies {
			if !yield(k) {
				return
			}
		}
	}) {
		set, err := policy.FromModules(map[string]string{"p.rego": "package svc.authz\n\n" + deferredPolicies[name] + "\n"}, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		e.SetPolicies(set)
		for _, observing := range []bool{false, true} {
			obs.set(observing)
			for i, req := range reqs {
				want, err := upfront.Check(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				wantRec := sink.Last(t)
				wantSeen := obs.set(observing)
				got, err := deferred.Check(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				gotRec := sink.Last(t)
				gotSeen := obs.set(observing)
				if got.GetStatus().GetCode() != want.GetStatus().GetCode() ||
					got.GetDeniedResponse().GetStatus().GetCode() != want.GetDeniedResponse().GetStatus().GetCode() {
					t.Errorf("%s, request %d: deferred answer %v, up-front answer %v", name, i, got.GetStatus(), want.GetStatus())
				}
				if gotRec.Allow != wantRec.Allow || gotRec.Reason != wantRec.Reason || !slices.Equal(gotRec.DenyReasons, wantRec.DenyReasons) {
					t.Errorf("%s, request %d: deferred decision %v %s %v, up-front %v %s %v", name, i,
						gotRec.Allow, gotRec.Reason, gotRec.DenyReasons, wantRec.Allow, wantRec.Reason, wantRec.DenyReasons)
				}
				if diff := cmp.Diff(wantSeen, gotSeen); diff != "" {
					t.Errorf("%s, request %d: observed input differs (-up-front +deferred):\n%s", name, i, diff)
				}
				if observing && len(gotSeen) != 1 {
					t.Errorf("%s, request %d: observer saw %d decisions, want 1", name, i, len(gotSeen))
				}
			}
		}
	}
}
