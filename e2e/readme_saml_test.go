package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// docsBlock returns the first ```sh block after the line that starts
// with marker in the page docs/<page>.
func docsBlock(t *testing.T, page, marker string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	return shBlockAfter(t, string(raw), marker)
}

// docRun is a documented shell block about to run as written: bash,
// the folder of the binaries the harness built and a temporary folder to
// run it in.
type docRun struct {
	t       *testing.T
	bash    string
	bin     string
	dir     string
	timeout time.Duration
}

// newDocRun skips the test unless bash, curl and the programs in tools
// are there, and builds the binaries named (all in one folder).
func newDocRun(t *testing.T, tools []string, binaries ...string) *docRun {
	t.Helper()
	d := &docRun{t: t, bash: harness.LookPath(t, "bash", "install bash"), dir: t.TempDir(), timeout: 2 * time.Minute}
	harness.LookPath(t, "curl", "apt-get install curl (scripts/test-packages.txt)")
	for _, tool := range tools {
		harness.LookPath(t, tool, tool)
	}
	for _, b := range binaries {
		d.bin = filepath.Dir(harness.Binary(t, b))
	}
	return d
}

// buildBlock returns the block of docs/<page> after marker, which starts
// with make build, without that line and with ./bin/ as the harness's
// binaries; pairs swap the rest, and none of fixed may stay.
func (d *docRun) buildBlock(page, marker string, fixed []string, pairs ...string) string {
	d.t.Helper()
	block := docsBlock(d.t, page, marker)
	if !strings.HasPrefix(block, "make build\n") {
		d.t.Fatalf("the block no longer starts with make build:\n%s", block)
	}
	script := strings.NewReplacer(append([]string{"make build\n", "", "./bin/", d.bin + "/"}, pairs...)...).Replace(block)
	for _, f := range fixed {
		if strings.Contains(script, f) {
			d.t.Fatalf("%s is still in the block after the swap:\n%s", f, script)
		}
	}
	return script
}

// pathEnv is the environment of a block that finds the binaries on PATH,
// with HOME in its folder.
func (d *docRun) pathEnv(extra ...string) []string {
	return append([]string{"PATH=" + d.bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + d.dir}, extra...)
}

// run runs script with bash opts and env in the folder, fails the test
// when it fails, and returns its combined output.
func (d *docRun) run(what, opts string, env []string, script string) string {
	d.t.Helper()
	return d.runAt(what, opts, d.dir, env, script)
}

// runIn runs script as run does with -uo pipefail, in dir.
func (d *docRun) runIn(what, dir string, env []string, script string) string {
	d.t.Helper()
	return d.runAt(what, "-uo pipefail", dir, env, script)
}

func (d *docRun) runAt(what, opts, dir string, env []string, script string) string {
	d.t.Helper()
	out, err := runDocBlock(d.t, d.bash, opts, dir, env, script, d.timeout)
	if err != nil {
		d.t.Fatalf("%s failed: %v\n%s", what, err, out)
	}
	return string(out)
}

// The local SAML round trip of docs/saml.md works as written: only the default
// ports are swapped for free ones.
func TestREADMESAMLRoundTrip(t *testing.T) {
	d := newDocRun(t, []string{"jq"}, "svc-sidecar", "core")
	d.timeout = 3 * time.Minute
	grpcAddr, httpAddr, samlAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	script := strings.NewReplacer("127.0.0.1:7701", samlAddr, "127.0.0.1:7700", httpAddr).
		Replace(docsBlock(t, "saml.md", "## Local round trip"))
	out := d.run("the docs/saml.md round trip", "-euo pipefail", d.pathEnv(
		"XDG_CONFIG_HOME="+filepath.Join(d.dir, "config"),
		"SVC_SIDECAR_ADDR="+grpcAddr, "SVC_HTTP_ADDR="+httpAddr, "SVC_SAML_ADDR="+samlAddr,
	), script)
	for _, want := range []string{`"allowed":true`, `"sub":"alice@example.com"`, `"roles":["admin"]`} {
		if !strings.Contains(out, want) {
			t.Errorf("validate-token answer lacks %s:\n%s", want, out)
		}
	}
	// The sidecar's log shares the output: the check's status is the one
	// line of three digits.
	var statuses []string
	for _, l := range strings.Split(out, "\n") {
		if len(l) == 3 && strings.Trim(l, "0123456789") == "" {
			statuses = append(statuses, l)
		}
	}
	if len(statuses) != 1 || statuses[0] != "200" {
		t.Errorf("check statuses %v, want [200] for the browser's cookie:\n%s", statuses, out)
	}
}

// runDocBlock runs a shell block of the docs with bash (options such as
// "-euo pipefail") in dir with env, in a process group of its own, so that
// whatever it starts in the background is stopped with it, whatever
// happens; it returns the block's combined output.
func runDocBlock(t *testing.T, bash, opts, dir string, env []string, script string, timeout time.Duration) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, append(strings.Fields(opts), "-c", script)...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	return cmd.CombinedOutput()
}
