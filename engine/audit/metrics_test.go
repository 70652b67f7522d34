package audit

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
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

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					v, _ := dp.Attributes.Value(attribute.Key("outcome"))
					got[m.Name+"/"+v.AsString()] = dp.Value
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					got[m.Name] = dp.Value
				}
			}
		}
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
