package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/wire"
)

// TestRestartKeepsUploadedBundle: a bundle uploaded with core sidecar
// reload-policy, without policy.bundle_cache_dir, is what the sidecar
// serves after core sidecar restart and after a SIGHUP with a changed
// configuration (both start a new image of the process): same revision,
// same decisions, and an older bundle is still refused. A changed
// configuration whose key does not verify the bundle makes the new image
// refuse it in its status and serve the configured policy.
func TestRestartKeepsUploadedBundle(t *testing.T) {
	k := newKeyring(t)
	dir := t.TempDir()
	signKey, verifyKey := ecKeyPair(t, dir)
	configWith := func(plan, key string) string {
		return strings.Replace(sidecarConfig, `plan = "team"`, fmt.Sprintf("plan = %q", plan), 1) +
			fmt.Sprintf("\n[policy]\nbundle_verify_key_file = %q\n", key)
	}
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: configWith("team", verifyKey), Env: map[string]string{
		"SVC_JWKS_URL": k.jwks.URL, "SVC_LOG_LEVEL": "info",
	}})
	configured := statusOf(t, s)
	viewer := k.token(t, "alice", "acme", "viewer")

	// The uploaded policy lets viewers delete; the configured one does not.
	policyDir := t.TempDir()
	authz := readPolicy(t)
	lenient := strings.Replace(authz, `"viewer": {"*": {"read"}},`, `"viewer": {"*": {"read", "delete"}},`, 1)
	if lenient == authz {
		t.Fatal("policies/authz.rego no longer has the viewer row this test changes")
	}
	harness.WriteFile(t, policyDir, "authz.rego", lenient)
	build := func(rev string) string {
		t.Helper()
		out := filepath.Join(dir, rev+".tar.gz")
		if code, _, stderr := runCore(t, "policy", "bundle", "--dir", policyDir, "--sign-key", signKey,
			"--revision", rev, "--out", out); code != 0 {
			t.Fatalf("core policy bundle %s: exit %d: %s", rev, code, stderr)
		}
		return out
	}
	older := build("uploaded-0")
	// Bundles are ordered by their creation time, recorded in seconds.
	for start := time.Now().Truncate(time.Second); time.Now().Truncate(time.Second).Equal(start); {
		time.Sleep(50 * time.Millisecond)
	}
	uploaded := build("uploaded-1")
	if code, stdout, stderr := runCoreAt(t, s, "sidecar", "reload-policy", "--bundle", uploaded); code != 0 {
		t.Fatalf("core sidecar reload-policy: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	canDelete := func(when string, want bool) {
		t.Helper()
		if got := authorizeAllowed(t, s, viewer, `{"action":"orders:delete","resource":{"id":"7"}}`); got != want {
			t.Errorf("%s: viewer orders:delete allowed %t, want %t", when, got, want)
		}
	}
	canDelete("after the upload", true)
	uploadedStatus := statusOf(t, s)

	// core sidecar restart keeps it.
	code, stdout, stderr := runCoreAt(t, s, "sidecar", "restart", "--drain-timeout", "10")
	if code != 0 || !strings.HasPrefix(stdout, "healthy ") || strings.Contains(stderr, "policy revision") {
		t.Fatalf("core sidecar restart: exit %d, stdout %q, stderr %q; want healthy and no revision change", code, stdout, stderr)
	}
	st := policyStatusOf(t, s)
	if !st.StartedAt.After(uploadedStatus.StartedAt) || st.PolicyRevision != "uploaded-1" || st.PolicySource != "upload" || st.Status != "healthy" {
		t.Errorf("after core sidecar restart: %+v; want a new image serving uploaded-1 from upload, healthy", st)
	}
	canDelete("after core sidecar restart", true)
	// The new image knows the active bundle: an older one is refused.
	if code, stdout, stderr := runCoreAt(t, s, "sidecar", "reload-policy", "--bundle", older); code != 1 || !strings.Contains(stdout+stderr, "revision-older") {
		t.Errorf("older bundle after the restart: exit %d, stdout %q, stderr %q; want exit 1, revision-older", code, stdout, stderr)
	}

	// SIGHUP with a changed configuration starts a new image: it keeps it.
	hupWith := func(config string, prev time.Time) wire.Status {
		t.Helper()
		harness.WriteFile(t, s.Dir, "svc.toml", config)
		if err := s.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, s, "the new image", func(st wire.Status) bool { return st.StartedAt.After(prev) })
		return policyStatusOf(t, s)
	}
	st = hupWith(configWith("enterprise", verifyKey), st.StartedAt)
	if st.PolicyRevision != "uploaded-1" || st.PolicySource != "upload" || st.Status != "healthy" {
		t.Errorf("after SIGHUP with a changed plan: %+v; want uploaded-1 from upload, healthy", st)
	}
	canDelete("after SIGHUP with a changed configuration", true)

	// A new key that does not verify the bundle: refused, loudly; the
	// configured policy serves, whole.
	_, otherKey := ecKeyPair(t, t.TempDir())
	st = hupWith(configWith("enterprise", otherKey), st.StartedAt)
	if st.PolicyRevision != configured.PolicyRevision || st.PolicySource != "config" || st.Status != "degraded" ||
		st.Reason != "policy-handover-refused" || st.PolicyHandoverRefused == nil || st.PolicyHandoverRefused.Code != "bundle-signature-invalid" {
		t.Errorf("after SIGHUP with another verification key: %+v; want %s from config, degraded, policy-handover-refused with bundle-signature-invalid",
			st, configured.PolicyRevision)
	}
	canDelete("after the carried bundle was refused", false)
	if !strings.Contains(s.Stderr.String(), "the policy bundle served before the restart is refused") {
		t.Errorf("the refusal is not logged")
	}
}

func policyStatusOf(t *testing.T, s *harness.Sidecar) wire.Status {
	t.Helper()
	return getStatus(t, s)
}

// authorizeAllowed asks POST /v1/authorize with the bearer token.
func authorizeAllowed(t *testing.T, s *harness.Sidecar, token, body string) bool {
	t.Helper()
	code, h, resp := harness.Send(t, http.MethodPost, s.URL("/v1/authorize"), body,
		map[string]string{"Content-Type": "application/json", "Authorization": harness.Bearer(token)})
	var got struct {
		Allowed bool `json:"allowed"`
	}
	if err := json.Unmarshal(resp, &got); err != nil {
		t.Fatalf("POST /v1/authorize: %s", harness.Describe(code, h, resp))
	}
	return got.Allowed
}
