package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"syscall"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/wire"
)

// TestSIGHUPBundleMaxBytesDryRun: a configuration reload that changes
// policy.bundle_max_bytes changes what a dry-run candidate may weigh, as
// it changes what an upload may: the limit is not the one read at the
// process's start.
func TestSIGHUPBundleMaxBytesDryRun(t *testing.T) {
	k := newKeyring(t)
	withLimit := func(n string) string { return sidecarConfig + "\n[policy]\nbundle_max_bytes = " + n + "\n" }
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: withLimit("1048576"), Env: map[string]string{"SVC_JWKS_URL": k.jwks.URL}})
	candidate := make([]byte, 3<<19) // 1.5 MiB, not a bundle
	_, _ = rand.Read(candidate)
	start := func() (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL("/v1/dry-run/sessions?duration=1m"), bytes.NewReader(candidate))
		req.Header.Set("Content-Type", "application/gzip")
		code, _, body := harness.Do(t, req)
		var e wire.ErrorBody
		_ = json.Unmarshal(body, &e)
		return code, e.Error.Code
	}
	if code, reason := start(); code != http.StatusRequestEntityTooLarge || reason != "bundle-too-large" {
		t.Fatalf("1.5 MiB candidate under a 1 MiB limit: %d %s, want 413 bundle-too-large", code, reason)
	}
	first := statusOf(t, s)
	harness.WriteFile(t, s.Dir, "svc.toml", withLimit("4194304"))
	if err := s.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, "the new image", func(st wire.Status) bool { return st.StartedAt.After(first.StartedAt) })
	if code, reason := start(); code == http.StatusRequestEntityTooLarge || reason == "bundle-too-large" {
		t.Fatalf("1.5 MiB candidate under a 4 MiB limit after the reload: %d %s, want it read (and refused as no bundle)", code, reason)
	}
}
