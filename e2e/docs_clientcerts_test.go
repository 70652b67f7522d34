package e2e

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

// The "Try it" block of docs/client-certs.md works as written: openssl
// makes the certificates, Debian's nginx verifies the client's and hands
// it to the sidecar, the demo service answers. Only the fixed ports are
// swapped for free ones, and the binaries are the ones the harness built.
func TestDocsClientCertsTryIt(t *testing.T) {
	nginx := harness.LookPath(t, "nginx", "apt-get install nginx (scripts/test-packages.txt)")
	d := newDocRun(t, []string{"openssl"}, "svc-sidecar", "svc-demo")
	httpAddr, front, app := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	frontPort := front[strings.LastIndexByte(front, ':')+1:]
	block := docsBlock(t, "client-certs.md", "## Try it")
	script := strings.NewReplacer(
		"127.0.0.1:7700", httpAddr,
		"127.0.0.1:8443", front,
		"localhost:8443", "localhost:"+frontPort,
		"127.0.0.1:5678", app,
		"\nnginx -p", "\n"+nginx+" -p",
	).Replace(block)
	for _, fixed := range []string{":7700", ":8443", ":5678"} {
		if strings.Contains(script, fixed) {
			t.Fatalf("%s is still in the block after the swap:\n%s", fixed, script)
		}
	}
	out := d.run("the docs/client-certs.md block", "-euo pipefail",
		d.pathEnv("SVC_SIDECAR_ADDR="+harness.FreeAddr(t), "SVC_HTTP_ADDR="+httpAddr), script)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("want the application's answer, 403, 401 and the check's refusal:\n%s", out)
	}
	if !strings.Contains(lines[0], `"subject":"spiffe://acme.example/ns/shop/sa/orders"`) || !strings.Contains(lines[0], `"tenant":"acme"`) {
		t.Errorf("the application did not answer the workload of acme: %s", lines[0])
	}
	if lines[1] != "403" || lines[2] != "401" || denyReason(lines[3]) != "client-cert-untrusted" {
		t.Errorf("want 403, 401 and client-cert-untrusted:\n%s", out)
	}
}
