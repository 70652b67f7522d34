package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// TestFreshCloneTour follows the front door as a newcomer does, in a fresh
// clone of the repository (its committed tree) with an empty home: `make
// run` builds and starts the sidecar; the README's one-minute tour and
// docs/getting-started.md's "Ask it something" run against it as
// written, from the clone, with the bin/core that `make run` built; then
// the page's production set-up (make build, core dev jwks, a sidecar with
// fail_mode closed) runs as written. Each block reaches an allowed and a
// refused request. Only the fixed listen addresses (and /tmp/svc-prod) are
// swapped for the test's.
func TestFreshCloneTour(t *testing.T) {
	d := newDocRun(t, []string{"git", "make", "go"})
	d.timeout = 5 * time.Minute
	clone := filepath.Join(d.dir, "svc")
	if out, err := exec.Command("git", "clone", "-q", harness.ModuleRoot(t), clone).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	home := t.TempDir()
	// The Go caches stay the machine's (a newcomer's are warm after the
	// first build too); HOME is new, so the development issuer's key pair
	// is made by whichever program runs first.
	env := append(harness.ChildEnv(nil), "HOME="+home, "XDG_CONFIG_HOME=")
	for _, v := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY"} {
		out, err := exec.Command("go", "env", v).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", v, err)
		}
		env = append(env, v+"="+strings.TrimSpace(string(out)))
	}
	page := func(name string) string {
		b, err := os.ReadFile(filepath.Join(clone, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme, started := page("README.md"), page("docs/getting-started.md")
	if !strings.Contains(readme, "make run    #") || !strings.Contains(shBlockAfter(t, started, "## Run it in one minute"), "make run") {
		t.Fatal("README.md and docs/getting-started.md no longer start the sidecar with make run")
	}

	grpcAddr, httpAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	cmd := exec.Command("make", "run")
	cmd.Dir = clone
	cmd.Env = append(env, "SVC_SIDECAR_ADDR="+grpcAddr, "SVC_HTTP_ADDR="+httpAddr)
	run := harness.StartProcess(t, "make run", cmd)
	if _, err := run.WaitOutput(t, true, 5*time.Minute, func(out string) bool {
		return strings.Contains(out, `"msg":"svc-sidecar serving"`)
	}); err != nil {
		t.Fatalf("make run in a fresh clone did not serve: %v", err)
	}
	if out := run.Stderr.String(); !strings.Contains(out, `"dev_mode":true`) || !strings.Contains(out, "DEVELOPMENT MODE") ||
		!strings.Contains(out, "except tokens of the development issuer (core dev token, iss svc-dev), which are verified") {
		t.Fatalf("make run did not start in development mode:\n%s", out)
	}
	local := strings.NewReplacer("localhost:7700", httpAddr, "'[::1]:50051'", grpcAddr)

	out := d.runIn("the README tour", clone, env, local.Replace(shBlockAfter(t, readme, "## A one-minute tour")))
	answersInOrder(t, "the README tour", out,
		`"reason":"policy-deny","deny_reasons":\["no-role"\].*"subject":"anonymous"`,
		`"allowed":true,"reason":"policy-allow".*"subject":"dev-user","tenant_id":"dev"`,
		`HTTP/1.1 200 OK(?s:.*?)X-Svc-User-Id: dev-user`,
		`HTTP/1.1 403 Forbidden`,
		`"allowed":false,"reason":"signature-invalid"`,
		`HTTP/1.1 401 Unauthorized(?s:.*?)signature-invalid`,
	)
	if _, err := os.Stat(filepath.Join(home, ".config", "svc", "dev-issuer", "key.pem")); err != nil {
		t.Errorf("the development issuer's key is not in ~/.config/svc/dev-issuer: %v", err)
	}

	out = d.runIn("getting started: ask it something", clone, env,
		local.Replace(shBlockAfter(t, started, "Ask it something")))
	answersInOrder(t, "getting started: ask it something", out,
		`"allowed":true,"claims":null,"reason":"dev-anonymous","subject":"anonymous"`,
		`"allowed":false,"reason":"policy-deny","deny_reasons":\["no-role"\]`,
		`HTTP/1.1 403 Forbidden(?s:.*?)"reason":"policy-deny"`,
		`"allowed":true,"reason":"policy-allow".*"subject":"dev-user","tenant_id":"dev"`,
		`HTTP/1.1 403 Forbidden(?s:.*?)role-forbidden: editor cannot orders:delete`,
		`svc_`,
	)

	idp, grpcProd, httpProd := harness.FreeAddr(t), harness.FreeAddr(t), harness.FreeAddr(t)
	prod := strings.NewReplacer(
		"/tmp/svc-prod", filepath.Join(d.dir, "svc-prod"),
		"127.0.0.1:8000", idp, "127.0.0.1:50061", grpcProd, "127.0.0.1:7710", httpProd, "localhost:7710", httpProd,
	).Replace(shBlockAfter(t, started, "### Try the production set-up with a local identity provider"))
	for _, fixed := range []string{":8000", ":50061", ":7710", "/tmp/svc-prod"} {
		if strings.Contains(prod, fixed) {
			t.Fatalf("%s is still in the production block after the swap:\n%s", fixed, prod)
		}
	}
	out = d.runIn("getting started: the production set-up", clone, env, prod)
	answersInOrder(t, "getting started: the production set-up", out,
		`"allowed":true,"reason":"policy-allow".*"subject":"dev-user","tenant_id":"dev"`,
		`"allowed":false,"reason":"token-malformed"`,
	)
}
