package localapi_test

import (
	"net/http/httptest"
	"testing"

	"github.com/svc-dev/svc/authz/localapi"
	"github.com/svc-dev/svc/wire"
)

// TestAliasesCompile: code written against the retired package still
// builds, and its values are the wire package's.
func TestAliasesCompile(t *testing.T) {
	var (
		_ wire.Status          = localapi.Status{Status: localapi.StatusHealthy, Audit: &localapi.AuditStats{}}
		_ wire.BundleStatus    = localapi.BundleStatus{}
		_ wire.HandoverRefusal = localapi.HandoverRefusal{}
		_ wire.PolicyState     = localapi.PolicyState{}
		_ wire.RateLimitStatus = localapi.RateLimitStatus{}
		_ wire.SAMLStatus      = localapi.SAMLStatus{IDPMetadata: localapi.SAMLMetadataStatus{}}
		_ wire.LogRecord       = localapi.LogRecord{}
		_ wire.SpanRecord      = localapi.SpanRecord{}
		_ wire.DroppedNotice   = localapi.DroppedNotice{Type: localapi.DroppedType}
		_ wire.DryRunReport    = localapi.DryRunReport{State: localapi.DryRunRunning, TopDenyReason: []localapi.ReasonCount{}, Changed: []localapi.Change{}}
		_ wire.ErrorBody       = localapi.ErrorBody{Error: localapi.ErrorDetail{}}
	)
	b := localapi.DenyBody{Reason: "policy-deny"}
	if got, want := string(b.AppendJSON(nil)), string(wire.DenyBody(b).AppendJSON(nil)); got != want {
		t.Fatalf("deny body %s, want %s", got, want)
	}
	rec := httptest.NewRecorder()
	localapi.WriteError(rec, 400, localapi.Compact, "input-invalid", "bad")
	if rec.Code != 400 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("WriteError answered %d %q", rec.Code, rec.Header())
	}
	if localapi.LevelOf("trace") != localapi.LevelTrace || localapi.PathStatus != wire.PathStatus {
		t.Fatal("constants differ from the wire package's")
	}
}
