package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

// TestBundleMaxBytes builds, with core policy bundle, a signed bundle of
// 50 MB (its 68 MB of data split into files of at most 32 MiB) and
// uploads it with core sidecar reload-policy: a sidecar with the default
// policy.bundle_max_bytes (32 MiB) refuses it as bundle-too-large and
// keeps its policy; one with SVC_POLICY_BUNDLE_MAX_BYTES = 64 MiB
// activates it.
func TestBundleMaxBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and loads a 50 MB bundle")
	}
	t.Parallel()
	k := newKeyring(t)
	dir := t.TempDir()
	signKey, verifyKey := ecKeyPair(t, dir)
	policyDir := t.TempDir()
	harness.WriteFile(t, policyDir, "authz.rego", readPolicy(t))
	// Random bytes in base64 compress to 3/4 of their size: four strings
	// of 17 MB make a bundle of 50 MB.
	var data strings.Builder
	data.WriteString(`{"svc":{"blobs":{`)
	for i := range 4 {
		b := make([]byte, 12_750_000)
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&data, `%s"b%d":{"v":"%s"}`, map[bool]string{true: ",", false: ""}[i > 0], i, base64.StdEncoding.EncodeToString(b))
	}
	data.WriteString(`}}}`)
	harness.WriteFile(t, policyDir, "data.json", data.String())
	data.Reset()
	out := filepath.Join(dir, "big.tar.gz")
	if code, _, stderr := runCore(t, "policy", "bundle", "--dir", policyDir, "--sign-key", signKey, "--revision", "rev-50mb", "--out", out); code != 0 {
		t.Fatalf("core policy bundle: exit %d: %s", code, stderr)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() < 50_000_000 || fi.Size() > 64<<20 {
		t.Fatalf("the bundle: %v, %v; want 50 MB", fi, err)
	}

	config := sidecarConfig + fmt.Sprintf("\n[policy]\nbundle_verify_key_file = %q\n", verifyKey)
	for _, tc := range []struct {
		name, maxBytes string
		wantExit       int
		wantOut        string
	}{
		{name: "default limit", wantExit: 1, wantOut: "bundle-too-large"},
		{name: "raised to 64 MiB", maxBytes: fmt.Sprint(64 << 20), wantOut: "rev-50mb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"SVC_JWKS_URL": k.jwks.URL}
			if tc.maxBytes != "" {
				env["SVC_POLICY_BUNDLE_MAX_BYTES"] = tc.maxBytes
			}
			s := harness.StartSidecar(t, harness.SidecarOptions{Config: config, Env: env})
			before := statusOf(t, s).PolicyRevision
			code, stdout, stderr := runCoreAt(t, s, "sidecar", "reload-policy", "--bundle", out)
			if code != tc.wantExit || !strings.Contains(stdout+stderr, tc.wantOut) {
				t.Fatalf("core sidecar reload-policy: exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tc.wantExit, tc.wantOut)
			}
			want := before
			if tc.wantExit == 0 {
				want = "rev-50mb"
			}
			if got := statusOf(t, s).PolicyRevision; got != want {
				t.Errorf("policy_revision = %q, want %q", got, want)
			}
		})
	}
}
