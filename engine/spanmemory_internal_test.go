package engine

import (
	"context"
	"testing"
	"unsafe"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
)

// TestEvalSpanOwnsItsStrings: a recorded policy.evaluate span waits in
// the exporter's queue, so its action and resource must not share the
// memory of the request they were mapped from (which would keep every
// queued request alive); the values stay the same.
func TestEvalSpanOwnsItsStrings(t *testing.T) {
	tel, _, rec := newTestInstruments(t, sdktrace.AlwaysSample())
	request := []byte("orders:read orders") // stands for a decoded request
	action := unsafe.String(&request[0], len("orders:read"))
	typ := unsafe.String(&request[len("orders:read ")], len("orders"))

	ctx, span := tel.startEval(context.Background())
	d := Decision{Allow: true, Reason: reason.PolicyAllow, DecisionID: "d-1", Revision: "r1"}
	tel.endEval(ctx, span, Input{Action: action, Resource: policy.Resource{Type: typ}}, d, nil, false)

	ended := rec.Ended()
	if len(ended) != 1 {
		t.Fatalf("%d spans recorded, want 1", len(ended))
	}
	inRequest := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		start := uintptr(unsafe.Pointer(&request[0]))
		return p >= start && p < start+uintptr(len(request))
	}
	want := map[string]string{AttrAction: "orders:read", AttrResource: "orders"}
	for _, kv := range ended[0].Attributes() {
		w, ok := want[string(kv.Key)]
		if !ok {
			continue
		}
		delete(want, string(kv.Key))
		got := kv.Value.AsString()
		if got != w {
			t.Errorf("%s = %q, want %q", kv.Key, got, w)
		}
		if inRequest(got) {
			t.Errorf("%s shares the request's memory", kv.Key)
		}
	}
	for k := range want {
		t.Errorf("span has no %s", k)
	}
}
