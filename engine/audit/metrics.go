package audit

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentationName = "github.com/svc-dev/svc/engine/audit"

// RegisterMetrics publishes the Logger's Stats through mp as
// svc.audit.records (counter, by outcome: written, dropped, failed) and
// svc.audit.queue.length (gauge). The values are read at collection time;
// unregister with the returned Registration.
func (l *Logger) RegisterMetrics(mp metric.MeterProvider) (metric.Registration, error) {
	m := mp.Meter(instrumentationName)
	records, err := m.Int64ObservableCounter("svc.audit.records",
		metric.WithDescription("Audit records by outcome: written, dropped (queue full or closed), failed (write error)."))
	if err != nil {
		return nil, err
	}
	queue, err := m.Int64ObservableGauge("svc.audit.queue.length",
		metric.WithDescription("Audit records waiting to be written."))
	if err != nil {
		return nil, err
	}
	written := metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "written")))
	dropped := metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "dropped")))
	failed := metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", "failed")))
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := l.Stats()
		o.ObserveInt64(records, int64(s.Written), written)
		o.ObserveInt64(records, int64(s.Dropped), dropped)
		o.ObserveInt64(records, int64(s.Failed), failed)
		o.ObserveInt64(queue, int64(s.QueueLen))
		return nil
	}, records, queue)
}
