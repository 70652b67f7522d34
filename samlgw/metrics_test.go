package samlgw_test

import (
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
	"github.com/svc-dev/svc/samlgw"
)

type auditRecords struct{ recs []audit.Record }

func (a *auditRecords) Log(r audit.Record) { a.recs = append(a.recs, r) }

// Every ACS outcome is counted by result and reason and audited.
func TestACSOutcomesCountedAndAudited(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	sink := &auditRecords{}
	f := newFixture(t, withSAML(func(s *config.SAML) { s.AllowIDPInitiated = true }), func(_ *config.Config, d *samlgw.Deps) {
		d.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		d.Audit = sink
	})
	doc := signed(t, valid())
	f.post(t, doc, true)
	f.post(t, doc, true) // replayed

	counts := metrictest.Values(metrictest.Collect(t, reader), "svc.saml.acs", "result", "reason")
	if counts["accepted/"] != 1 || counts["refused/saml-replayed"] != 1 {
		t.Errorf("svc.saml.acs = %v, want one accepted and one refused/saml-replayed", counts)
	}
	if len(sink.recs) != 2 || !sink.recs[0].Allow || sink.recs[1].Allow || sink.recs[1].Reason != "saml-replayed" ||
		sink.recs[0].UserID != "alice@example.com" || sink.recs[0].Tenant != "AcMe" || sink.recs[1].Source != "saml" {
		t.Errorf("audit records %+v", sink.recs)
	}
}
