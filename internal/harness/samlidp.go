package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SAMLIdP is the samlify identity provider of e2e/samlidp/server.mjs.
type SAMLIdP struct {
	*Process
	// BaseURL is where it serves; MetadataURL its metadata.
	BaseURL, MetadataURL string
}

// StartSAMLIdP runs e2e/samlidp/server.mjs on a free loopback port with
// the PEM key pair given, trusting the SP whose metadata is at
// spMetadata (fetched on the first sign-on).
func StartSAMLIdP(t testing.TB, keyPEM, certPEM []byte, spMetadata string) *SAMLIdP {
	t.Helper()
	return StartSAMLIdPArgs(t, keyPEM, certPEM, spMetadata)
}

// StartSAMLIdPArgs is StartSAMLIdP with further command-line options of
// the IdP, such as --users <file> and --user <name>.
func StartSAMLIdPArgs(t testing.TB, keyPEM, certPEM []byte, spMetadata string, args ...string) *SAMLIdP {
	t.Helper()
	node := LookPath(t, "node", "nodejs")
	e2e := filepath.Join(ModuleRoot(t), "e2e")
	if _, err := os.Stat(filepath.Join(e2e, "node_modules", "samlify", "package.json")); err != nil {
		Missing(t, "npm package samlify", "run scripts/install-test-deps.sh, or npm ci in e2e/")
	}
	dir := t.TempDir()
	key := WriteFile(t, dir, "idp-key.pem", string(keyPEM))
	cert := WriteFile(t, dir, "idp-cert.pem", string(certPEM))
	cmd := exec.Command(node, append([]string{filepath.Join(e2e, "samlidp", "server.mjs"),
		"--key", key, "--cert", cert, "--sp-metadata", spMetadata}, args...)...)
	cmd.Dir = e2e
	cmd.Env = envList(baseEnv(), nil)
	p := &SAMLIdP{Process: StartProcess(t, "samlidp", cmd)}
	t.Cleanup(func() { p.Stop(t) })
	const prefix = "samlidp listening on "
	out, err := p.WaitOutput(t, false, 30*time.Second, func(s string) bool { return strings.Contains(s, prefix) && strings.Contains(s, "\n") })
	if err != nil {
		t.Fatalf("samlidp did not start: %v", err)
	}
	_, rest, _ := strings.Cut(out, prefix)
	p.BaseURL, _, _ = strings.Cut(rest, "\n")
	p.MetadataURL = p.BaseURL + "/metadata"
	return p
}
