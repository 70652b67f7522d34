package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// TestRestartSAMLOnlyReadyAtOnce restarts a SAML-only sidecar (no
// sdk.jwks_url; its tokens come from the local issuer): the new image has
// no JWKS to wait for and takes over at once. Before, every such restart
// held connections for the 30 s the handover waits for JWKS keys.
func TestRestartSAMLOnlyReadyAtOnce(t *testing.T) {
	idp := exampleIdP(t)
	md := harness.WriteFile(t, t.TempDir(), "idp.xml", string(idp.Metadata()))
	samlAddr := harness.FreeAddr(t)
	s := harness.StartSidecar(t, harness.SidecarOptions{Env: map[string]string{
		"SVC_FAIL_MODE":              "closed",
		"SVC_SAML_ADDR":              samlAddr,
		"SVC_SAML_ENTITY_ID":         "http://" + samlAddr + "/auth/saml/metadata",
		"SVC_SAML_ACS_URL":           "http://" + samlAddr + "/auth/saml/acs",
		"SVC_SAML_IDP_METADATA_FILE": md,
		"SVC_AUDIT_DESTINATION":      "off",
	}})
	before := statusOf(t, s)
	start := time.Now()
	code, stdout, stderr := runCoreAt(t, s, "sidecar", "restart", "--drain-timeout", "1")
	took := time.Since(start)
	if code != 0 || !strings.HasPrefix(stdout, "healthy ") {
		t.Fatalf("core sidecar restart: exit %d after %v, stdout %q, stderr %q", code, took, stdout, stderr)
	}
	t.Logf("restart answered healthy after %v", took)
	if took > 10*time.Second {
		t.Errorf("the restart took %v; the new image waited for a JWKS it cannot have", took)
	}
	after := statusOf(t, s)
	if !after.StartedAt.After(before.StartedAt) || after.PID != before.PID {
		t.Errorf("after the restart: pid %d, started_at %s (was %d, %s); want the same PID and a new image",
			after.PID, after.StartedAt, before.PID, before.StartedAt)
	}
	for _, rec := range s.LogRecords(t) {
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "before the JWKS is cached") {
			t.Errorf("the new image logged %q", msg)
		}
	}
}
