package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

// The "Try it" block of docs/decision-logs.md works as written: records
// wait in the spool while NATS is down, and a sidecar started after a
// kill -9 ships what the killed one left. Only the default ports are
// swapped for free ones.
func TestDocsDecisionLogTryIt(t *testing.T) {
	d := newDocRun(t, []string{"nats-server", "jq"}, "svc-sidecar", "core")
	grpcAddr, httpAddr, natsAddr := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	_, natsPort, _ := strings.Cut(natsAddr, ":")
	script := strings.NewReplacer("127.0.0.1:7700", httpAddr, "-p 4222", "-p "+natsPort, "127.0.0.1:4222", natsAddr).
		Replace(docsBlock(t, "decision-logs.md", "## Try it"))
	out := d.run("the docs/decision-logs.md block", "-euo pipefail",
		d.pathEnv("SVC_SIDECAR_ADDR="+grpcAddr, "SVC_HTTP_ADDR="+httpAddr), script)
	// Only the block's own lines: bash reports the killed job too.
	var got []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "shipped") || strings.HasPrefix(l, "unsent") {
			got = append(got, l)
		}
	}
	want := []string{"shipped 2", "unsent 3", "shipped 3 left by the killed sidecar"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("output %q, want the lines %q", out, want)
	}
}

// The "Replay" block of docs/decision-logs.md works as written, run from
// the module's root as it says: every line it shows after "# → " is in
// the output.
func TestDocsDecisionLogReplay(t *testing.T) {
	d := newDocRun(t, []string{"jq"}, "core")
	block := docsBlock(t, "decision-logs.md", "## Replay")
	script := strings.ReplaceAll(block, " policies/authz.rego", " "+filepath.Join(harness.ModuleRoot(t), "policies", "authz.rego"))
	out := d.run("the docs/decision-logs.md replay block", "-euo pipefail", d.pathEnv(), script)
	var shown int
	for _, l := range strings.Split(block, "\n") {
		if want, ok := strings.CutPrefix(l, "# → "); ok {
			shown++
			if !strings.Contains(out, strings.TrimSpace(want)) {
				t.Errorf("output has no line %q:\n%s", want, out)
			}
		}
	}
	if shown == 0 {
		t.Fatal("the block shows no output")
	}
}
