package audit

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/svc-dev/svc/internal/testkit/metrictest"
)

func TestRegisterMetrics(t *testing.T) {
	g := newGateWriter()
	l := New(g, Options{QueueSize: 1})
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	reg, err := l.RegisterMetrics(mp)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()

	l.Log(seqRecord(0))
	<-g.entered
	for i := 1; i <= 4; i++ { // one queued, three dropped
		l.Log(seqRecord(i))
	}
	close(g.release)
	closeNow(t, l)

	rm := metrictest.Collect(t, reader)
	got := map[string]int64{"svc.audit.queue.length": metrictest.Values(rm, "svc.audit.queue.length")[""]}
	for outcome, n := range metrictest.Values(rm, "svc.audit.records", "outcome") {
		got["svc.audit.records/"+outcome] = n
	}
	want := map[string]int64{
		"svc.audit.records/written": 2,
		"svc.audit.records/dropped": 3,
		"svc.audit.records/failed":  0,
		"svc.audit.queue.length":    0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if _, ok := got["svc.audit.records/written"]; !ok {
		t.Errorf("no svc.audit.records data points: %v", got)
	}
}
