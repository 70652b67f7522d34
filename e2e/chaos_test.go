package e2e

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/natstest"
	"github.com/svc-dev/svc/internal/testkit/tcpproxy"
	"github.com/svc-dev/svc/wire"
)

var (
	chaosLong  = flag.Bool("chaos.long", false, "hold each fault of TestChaosMatrix 20 s instead of 2.5 s")
	chaosWrite = flag.String("chaos.write", "", "write TestChaosMatrix's table as a Markdown page to this file")
)

const (
	chaosReplicas = 3
	chaosCallers  = 64
	// chaosBudget is the metered tenant's budget, requests a minute.
	chaosBudget = 600
	// Poll bounds of the bundle server and of the JWKS.
	chaosBundlePoll = 300 * time.Millisecond
	chaosJWKSMin    = time.Second
	chaosJWKSMax    = 2 * time.Second
	// chaosShipBackoff is the decision log shipper's longest backoff: a
	// sink back after an outage may wait that long for its first batch.
	chaosShipBackoff = 10 * time.Second
)

// chaosFleet is the system under test: three replicas in production
// configuration, Redis, nginx serving signed bundles, the JWKS, the
// samlify IdP, NATS JetStream taking the decision logs.
type chaosFleet struct {
	t         *testing.T
	k         *keyring
	replicas  []*harness.Sidecar
	opts      []harness.SidecarOptions
	proxies   []*tcpproxy.Proxy
	targets   []*chaosTarget
	redis     *harness.Process
	redisArg  []string
	redisAddr string
	nginx     *harness.Proxy
	served    string
	bundleAt  string
	signKey   string
	keys      string
	modified  time.Time
	// saml: the samlify IdP; samlAddrs: each replica's SAML gateway.
	saml      samlSetup
	samlAddrs []string
	// nats takes every replica's decision log; spools[i] is replica i's
	// spool root, kept across its restarts so that a successor ships
	// what it left.
	nats   *natstest.Server
	spools []string
}

func (f *chaosFleet) startRedis() {
	t := f.t
	cmd := exec.Command(harness.LookPath(t, "redis-server", "apt-get install redis-server (scripts/test-packages.txt)"), f.redisArg...)
	f.redis = harness.StartProcess(t, "redis-server", cmd)
	addr := f.redisAddr
	testkit.Eventually(t, "redis-server listening", func() bool {
		c, err := netDial(addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// build signs a bundle of the policy in dir as revision and returns its
// path; serve publishes it.
func (f *chaosFleet) build(dir, revision string) string {
	t := f.t
	out := filepath.Join(f.keys, revision+".tar.gz")
	if code, _, stderr := runCore(t, "policy", "bundle", "--dir", dir, "--sign-key", f.signKey, "--revision", revision, "--out", out); code != 0 {
		t.Fatalf("core policy bundle: %s", stderr)
	}
	return out
}

// serve copies the bundle at path into nginx's root at once (a rename).
// nginx's ETag is the modification time in seconds and the size: each
// bundle gets a modification time of its own.
func (f *chaosFleet) serve(path string) {
	t := f.t
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(f.served, ".next.tar.gz")
	testkit.WriteFileMode(t, tmp, b, 0o644)
	if now := time.Now().Truncate(time.Second); now.After(f.modified) {
		f.modified = now
	} else {
		f.modified = f.modified.Add(time.Second)
	}
	if err := os.Chtimes(tmp, f.modified, f.modified); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(f.served, "svc.tar.gz")); err != nil {
		t.Fatal(err)
	}
}

func (f *chaosFleet) launch(i int) {
	s := harness.LaunchSidecar(f.t, f.opts[i])
	f.replicas[i] = s
	testkit.Eventually(f.t, fmt.Sprintf("replica %d ready", i), func() bool { return ready(s) })
}

func ready(s *harness.Sidecar) bool {
	resp, err := (&http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get(s.URL("/readyz"))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (f *chaosFleet) status(i int) (wire.Status, bool) {
	var st wire.Status
	resp, err := (&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}).Get(f.replicas[i].URL("/v1/status"))
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || jsonDecode(resp.Body, &st) != nil {
		return st, false
	}
	return st, true
}

// all reports whether cond holds for the status of every replica.
func (f *chaosFleet) all(cond func(wire.Status) bool) bool {
	for i := range f.replicas {
		st, ok := f.status(i)
		if !ok || !cond(st) {
			return false
		}
	}
	return true
}

func startChaosFleet(t *testing.T) *chaosFleet {
	f := &chaosFleet{t: t, k: newKeyring(t), keys: t.TempDir(), served: t.TempDir()}
	f.saml = startSAMLIdP(t)
	var verifyKey string
	f.signKey, verifyKey = ecKeyPair(t, f.keys)
	f.serve(f.build(filepath.Join(harness.ModuleRoot(t), "policies"), "v1"))
	f.bundleAt = harness.FreeAddr(t)
	f.nginx = harness.StartNginxStatic(t, f.served, f.bundleAt)

	redisAddr := harness.FreeAddr(t)
	_, port, _ := strings.Cut(redisAddr, ":")
	f.redisAddr = redisAddr
	f.redisArg = []string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}
	f.startRedis()
	f.nats = natstest.Start(t)

	config := sidecarConfig + fmt.Sprintf(`
[jwt]
jwks_min_refresh = %q
jwks_max_refresh = %q

[rate_limit]
default_rpm = 100000000
redis_timeout = "250ms"
redis_fallback = "local"
replicas = %d

[rate_limit.per_tenant]
acme = 0
globex = %d

[policy]
bundle_min_poll = "150ms"
bundle_max_poll = %q
`, chaosJWKSMin, chaosJWKSMax, chaosReplicas, chaosBudget, chaosBundlePoll.String())
	for i := 0; i < chaosReplicas; i++ {
		px := tcpproxy.Start(t, "127.0.0.1:"+port)
		f.proxies = append(f.proxies, px)
		// Replica 0's SAML gateway is the one the IdP knows (entity id
		// and ACS URL); every replica serves the same SP.
		samlAddr := f.saml.samlAddr
		if i > 0 {
			samlAddr = harness.FreeAddr(t)
		}
		f.samlAddrs = append(f.samlAddrs, samlAddr)
		spool := filepath.Join(f.keys, "spool-"+strconv.Itoa(i))
		f.spools = append(f.spools, spool)
		opts := harness.SidecarOptions{Config: config, Env: f.saml.env(samlAddr, true, map[string]string{
			"SVC_SIDECAR_ADDR":           harness.FreeAddr(t),
			"SVC_HTTP_ADDR":              harness.FreeAddr(t),
			"SVC_JWKS_URL":               f.k.jwks.URL,
			"SVC_BUNDLE_URL":             "http://" + f.bundleAt + "/svc.tar.gz",
			"SVC_BUNDLE_VERIFY_KEY_FILE": verifyKey,
			"SVC_BUNDLE_CACHE_DIR":       filepath.Join(f.keys, "cache-"+strconv.Itoa(i)),
			"SVC_REDIS_ADDR":             px.Addr,
			"SVC_LOG_LEVEL":              "warn",
			"SVC_DECISION_LOG_SINK":      "nats",
			"SVC_DECISION_LOG_URL":       f.nats.URL(),
			"SVC_DECISION_LOG_SPOOL_DIR": spool,
		})}
		f.opts = append(f.opts, opts)
		f.replicas = append(f.replicas, nil)
		f.launch(i)
	}
	for _, s := range f.replicas {
		f.targets = append(f.targets, &chaosTarget{grpc: s.Conn(t), http: "http://" + s.HTTPAddr})
	}
	return f
}
