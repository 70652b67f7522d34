package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// The install lines of the SDK pages (docs/python.md, docs/typescript.md,
// docs/go.md, docs/rust.md), each run as written in a new directory
// outside the repository, ending in a real call that a sidecar (or, for
// Rust, the engine in-process) answers. The blocks are read from the pages,
// so the pages cannot drift from what runs; only the placeholder of the
// checkout's path and the example addresses are replaced.

// checkoutPlaceholder is how the pages name the svc checkout.
const checkoutPlaceholder = "/path/to/svc"

// sdkDist holds the artifacts of the pages' `make dist-sdk`, made once per
// test run for the Python and TypeScript tests.
var sdkDist struct {
	sync.Mutex
	dir string
}

// distSDK runs the `make dist-sdk` block that follows marker in page, in
// the repository root, with DIST (the Makefile's `DIST ?= dist`) set to a
// temporary directory instead of the checkout's dist/, and returns that
// directory. It fails the test when the build leaves anything new in the
// repository's git status: the artifacts go to DIST and nowhere else.
func distSDK(t *testing.T, page, marker string) string {
	t.Helper()
	bash := harness.LookPath(t, "bash", "bash")
	harness.LookPath(t, "make", "make")
	harness.LookPath(t, "npm", "npm")
	harness.LookPath(t, "git", "git")
	if err := exec.Command("/usr/bin/python3", "-c", "import build").Run(); err != nil {
		harness.Missing(t, "python module build", "apt-get install python3-build")
	}
	block := docsBlock(t, page, marker)
	if strings.TrimSpace(block) != "make dist-sdk" {
		t.Fatalf("docs/%s: the block after %q is %q, want make dist-sdk", page, marker, block)
	}
	sdkDist.Lock()
	defer sdkDist.Unlock()
	if sdkDist.dir != "" {
		return sdkDist.dir
	}
	root := harness.ModuleRoot(t)
	before := gitStatus(t, root)
	// Not t.TempDir: the artifacts serve every test of the run.
	dir, err := os.MkdirTemp("", "svc-e2e-dist-")
	if err != nil {
		t.Fatal(err)
	}
	out, err := runDocBlock(t, bash, "-euo pipefail", root, harness.ChildEnv(map[string]string{"DIST": dir}), block, 10*time.Minute)
	if err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("make dist-sdk: %v\n%s", err, out)
	}
	for _, f := range []string{"svc_sdk-0.1.0-py3-none-any.whl", "svc-sdk-0.1.0.tgz", "SHA256SUMS"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("make dist-sdk made no %s: %v", f, err)
		}
	}
	sums, _ := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	check := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	check.Dir = dir
	if o, err := check.CombinedOutput(); err != nil || strings.Count(string(sums), "\n") != 2 {
		t.Errorf("SHA256SUMS does not check both artifacts: %v\n%s\n%s", err, sums, o)
	}
	for _, l := range gitStatus(t, root) {
		if !slices.Contains(before, l) {
			t.Errorf("make dist-sdk left %q in the repository", l)
		}
	}
	sdkDist.dir = dir
	return dir
}

// removeSDKDist removes the artifacts of distSDK; TestMain calls it after
// the tests.
func removeSDKDist() {
	sdkDist.Lock()
	defer sdkDist.Unlock()
	if sdkDist.dir != "" {
		_ = os.RemoveAll(sdkDist.dir)
		sdkDist.dir = ""
	}
}

// gitStatus returns the lines of `git status --porcelain` of the
// repository, untracked files each listed, ignored ones left out.
func gitStatus(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=all").Output()
	if err != nil {
		t.Fatalf("git status: %v", err)
	}
	return strings.Split(strings.TrimRight(string(out), "\n"), "\n")
}

// installBlock returns the sh block after marker in page with the
// checkout's placeholder replaced: its dist/ by the artifacts of distSDK
// (dist, "" when the page installs none), the rest by the repository root.
func installBlock(t *testing.T, page, marker, dist string) string {
	t.Helper()
	block := docsBlock(t, page, marker)
	if !strings.Contains(block, checkoutPlaceholder) {
		t.Fatalf("docs/%s: the block after %q names no %s", page, marker, checkoutPlaceholder)
	}
	pairs := []string{checkoutPlaceholder, harness.ModuleRoot(t)}
	if dist != "" {
		pairs = append([]string{checkoutPlaceholder + "/dist/", dist + "/"}, pairs...)
	}
	return strings.NewReplacer(pairs...).Replace(block)
}

// checkShown requires every answer a block shows in its comment lines to
// be in out: each comment's text, less "with make run in another
// terminal:", cut at "...", gives fragments out must hold.
func checkShown(t *testing.T, page, block, out string) {
	t.Helper()
	shown := 0
	for _, line := range strings.Split(block, "\n") {
		comment, ok := strings.CutPrefix(strings.TrimSpace(line), "# ")
		if !ok {
			continue
		}
		if _, after, ok := strings.Cut(comment, "with make run in another terminal: "); ok {
			comment = after
		}
		for _, frag := range strings.Split(comment, "...") {
			frag = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(frag), ","))
			if frag == "" || frag == ")" || frag == "}" {
				continue
			}
			shown++
			if !strings.Contains(out, frag) {
				t.Errorf("docs/%s shows %q, which the output lacks:\n%s", page, frag, out)
			}
		}
	}
	if shown == 0 {
		t.Errorf("docs/%s: the block shows no answer:\n%s", page, block)
	}
}

// startDevSidecar starts a sidecar as make run does: development mode, no
// deployment tenant.
func startDevSidecar(t *testing.T) *harness.Sidecar {
	t.Helper()
	return harness.StartSidecar(t, harness.SidecarOptions{Env: map[string]string{"SVC_TENANT_ID": ""}})
}

// goPath puts the go command of the toolchain running the tests first.
func goPath() string {
	path := os.Getenv("PATH")
	if root := os.Getenv("GOROOT"); root != "" {
		path = filepath.Join(root, "bin") + string(os.PathListSeparator) + path
	}
	return path
}

// TestInstallLines_Python: the wheel of make dist-sdk, installed with pip
// into a new virtual environment without an index, imported, and one
// validate-token call answered by a development-mode sidecar.
func TestInstallLines_Python(t *testing.T) {
	bash := harness.LookPath(t, "bash", "bash")
	python := harness.LookPath(t, "python3", "python3")
	if err := exec.Command(python, "-c", "import ensurepip, venv").Run(); err != nil {
		harness.Missing(t, "python3 venv with pip", "apt-get install python3-venv")
	}
	dist := distSDK(t, "python.md", "The package is not on PyPI yet")
	block := installBlock(t, "python.md", "Then, in your application's directory", dist)
	s := startDevSidecar(t)

	app := t.TempDir()
	out, err := runDocBlock(t, bash, "-euo pipefail", app,
		harness.ChildEnv(map[string]string{"SVC_SIDECAR_URL": s.URL(""), "PIP_NO_CACHE_DIR": "1"}), block, 5*time.Minute)
	if err != nil {
		t.Fatalf("docs/python.md install lines: %v\n%s", err, out)
	}
	checkShown(t, "python.md", block, string(out))
	// What ran is the wheel installed in the new environment.
	site, err := filepath.Glob(filepath.Join(app, ".venv", "lib", "python3*", "site-packages", "svc_sdk", "client.py"))
	if err != nil || len(site) != 1 {
		t.Errorf("the venv has no svc_sdk installed: %v %v", site, err)
	}
}

// TestInstallLines_TypeScript: the tarball of make dist-sdk installed with
// npm into a new project, imported, and one validateToken call answered
// by a development-mode sidecar.
func TestInstallLines_TypeScript(t *testing.T) {
	bash := harness.LookPath(t, "bash", "bash")
	harness.LookPath(t, "node", "nodejs")
	dist := distSDK(t, "typescript.md", "The package is not on a registry yet")
	block := installBlock(t, "typescript.md", "Then, in your application's directory", dist)
	s := startDevSidecar(t)

	app := t.TempDir()
	env := harness.ChildEnv(map[string]string{
		"SVC_SIDECAR_URL": s.URL(""),
		// The package has no dependencies: npm has nothing to fetch, and
		// its audit and update check must not wait on a registry.
		"npm_config_audit": "false", "npm_config_fund": "false", "npm_config_update_notifier": "false",
	})
	out, err := runDocBlock(t, bash, "-euo pipefail", app, env, block, 5*time.Minute)
	if err != nil {
		t.Fatalf("docs/typescript.md install lines: %v\n%s", err, out)
	}
	checkShown(t, "typescript.md", block, string(out))
	if _, err := os.Stat(filepath.Join(app, "node_modules", "@svc", "sdk", "dist", "index.js")); err != nil {
		t.Errorf("the project has no @svc/sdk installed: %v", err)
	}
}

// TestInstallLines_Go: a new module requires the unpublished module through
// a replace directive to the checkout, builds the validate-token example
// and asks a development-mode sidecar over gRPC.
func TestInstallLines_Go(t *testing.T) {
	bash := harness.LookPath(t, "bash", "bash")
	root := harness.ModuleRoot(t)
	setup := installBlock(t, "go.md", "All are in the one module", "")
	build := docsBlock(t, "go.md", "Build it and ask a sidecar")
	program, err := os.ReadFile(filepath.Join(root, "examples", "validate-token", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	s := startDevSidecar(t)

	app := t.TempDir()
	env := harness.ChildEnv(map[string]string{
		"PATH":             goPath(),
		"SVC_SIDECAR_ADDR": s.GRPCAddr,
		"GOFLAGS":          "-mod=mod",
		// Offline: the module cache holds every module the repository
		// builds with. With the proxy off, the unpublished module is
		// "not found" as a public proxy answers, and the replace
		// directive provides it; the checksum database is out of reach,
		// and the cache's modules were verified against the
		// repository's go.sum when they were downloaded.
		"GOPROXY": "off", "GOSUMDB": "off",
	})
	out, err := runDocBlock(t, bash, "-euo pipefail", app, env, setup, 5*time.Minute)
	if err != nil {
		t.Fatalf("docs/go.md install lines: %v\n%s", err, out)
	}
	// The page shows examples/validate-token/main.go (examples' own test
	// keeps the copy identical), saved as main.go.
	harness.WriteFile(t, app, "main.go", string(program))
	out, err = runDocBlock(t, bash, "-euo pipefail", app, env, build, 5*time.Minute)
	if err != nil {
		t.Fatalf("docs/go.md build lines: %v\n%s", err, out)
	}
	checkShown(t, "go.md", build, string(out))
	mod, err := os.ReadFile(filepath.Join(app, "go.mod"))
	if err != nil || !strings.Contains(string(mod), "replace github.com/svc-dev/svc => "+root) {
		t.Errorf("go.mod has no replace directive to the checkout: %v\n%s", err, mod)
	}
}

// TestInstallLines_Rust: a new cargo project with a path dependency on the
// crate, built offline from Debian's registry, runs the tower_server
// example on a real socket, and the layer answers the page's calls.
func TestInstallLines_Rust(t *testing.T) {
	bash := harness.LookPath(t, "bash", "bash")
	harness.LookPath(t, "cargo", "cargo")
	harness.LookPath(t, "curl", "curl")
	root := harness.ModuleRoot(t)
	setup := installBlock(t, "rust.md", "A new project outside the repository", "")
	addr := harness.FreeAddr(t)
	ports := strings.NewReplacer("127.0.0.1:8080", addr, "localhost:8080", addr)
	run := strings.TrimSpace(ports.Replace(docsBlock(t, "rust.md", "`src/main.rs` is then the crate's")))
	calls := ports.Replace(docsBlock(t, "rust.md", "and call it from another terminal"))
	if strings.Contains(run, "\n") || !strings.HasPrefix(run, "cargo run") {
		t.Fatalf("docs/rust.md: the server block is %q, want one cargo run line", run)
	}

	dir := t.TempDir()
	env := harness.ChildEnv(map[string]string{
		"PATH": goPath(),
		// The crate's own target directory: the engine's C archive and the
		// crates compiled for its tests are reused, not rebuilt.
		"CARGO_TARGET_DIR": filepath.Join(root, "sdk", "rust", "target"),
	})
	out, err := runDocBlock(t, bash, "-euo pipefail", dir, env, setup, 20*time.Minute)
	if err != nil {
		t.Fatalf("docs/rust.md install lines: %v\n%s", err, out)
	}
	project := filepath.Join(dir, "orders")
	if lock, err := os.ReadFile(filepath.Join(project, "Cargo.lock")); err != nil || !strings.Contains(string(lock), "name = \"svc\"") {
		t.Fatalf("the new project's Cargo.lock lacks the svc crate: %v", err)
	}

	cmd := exec.Command(bash, "-c", "exec "+run)
	cmd.Dir, cmd.Env = project, env
	server := harness.StartProcess(t, "orders", cmd)
	if _, err := server.WaitOutput(t, false, 2*time.Minute, func(s string) bool {
		return strings.Contains(s, "listening on "+addr)
	}); err != nil {
		t.Fatal(err)
	}
	out, err = runDocBlock(t, bash, "-euo pipefail", project, env, calls, time.Minute)
	if err != nil {
		t.Fatalf("docs/rust.md calls: %v\n%s", err, out)
	}
	checkShown(t, "rust.md", calls, string(out))
}

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
