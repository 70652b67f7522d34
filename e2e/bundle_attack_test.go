package e2e

import (
	"bytes"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/bundletest"
	"github.com/svc-dev/svc/wire"
)

// replayServer is a control plane whose answer the attacker chooses: it
// serves whichever bundle was set last.
type replayServer struct {
	*httptest.Server
	mu     sync.Mutex
	served []byte
}

func startReplayServer(t *testing.T, first []byte) *replayServer {
	t.Helper()
	r := &replayServer{served: first}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		b := r.served
		r.mu.Unlock()
		_, _ = w.Write(b)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *replayServer) serve(b []byte) { r.mu.Lock(); r.served = b; r.mu.Unlock() }

// bundleSigner signs bundles with a key pair of its own; the sidecar
// verifies them with verifyKeyFile.
type bundleSigner struct {
	signPEM       []byte
	verifyKeyFile string
	shipped       string // the shipped policies
}

func newBundleSigner(t *testing.T) *bundleSigner {
	t.Helper()
	signKey, verifyKey := ecKeyPair(t, t.TempDir())
	signPEM, err := os.ReadFile(signKey)
	if err != nil {
		t.Fatal(err)
	}
	return &bundleSigner{signPEM: signPEM, verifyKeyFile: verifyKey, shipped: filepath.Join(harness.ModuleRoot(t), "policies")}
}

// build signs the policies of dir as bundle revision, created at created.
func (b *bundleSigner) build(t *testing.T, dir, revision string, created time.Time) []byte {
	t.Helper()
	return bundletest.Build(t, dir, bundle.BuildOptions{Revision: revision, SignKeyPEM: b.signPEM, CreatedAt: created})
}

// rollbackBundles builds the signed bundles of the attacks: the shipped
// policy, and an old one under which a viewer may delete, the kind of
// bundle an attacker would bring back.
type rollbackBundles struct {
	*bundleSigner
	lax string
}

func newRollbackBundles(t *testing.T) *rollbackBundles {
	t.Helper()
	b := newBundleSigner(t)
	src, err := os.ReadFile(filepath.Join(b.shipped, "authz.rego"))
	if err != nil {
		t.Fatal(err)
	}
	const grant = `"viewer": {"*": {"read"}},`
	if !bytes.Contains(src, []byte(grant)) {
		t.Fatalf("policies/authz.rego no longer holds %s; update the test", grant)
	}
	lax := t.TempDir()
	harness.WriteFile(t, lax, "authz.rego", string(bytes.Replace(src, []byte(grant), []byte(`"viewer": {"*": {"read", "delete"}},`), 1)))
	return &rollbackBundles{bundleSigner: b, lax: lax}
}

// pollingConfig polls the control plane every 100–200 ms.
const pollingConfig = sidecarConfig + `
[policy]
bundle_min_poll = "100ms"
bundle_max_poll = "200ms"
`

// startPollingSidecar starts a sidecar on pollingConfig that polls the
// control plane at cpURL for bundles it verifies with verifyKeyFile, with
// env added to its environment.
func startPollingSidecar(t *testing.T, k *keyring, cpURL, verifyKeyFile string, env map[string]string) *harness.Sidecar {
	t.Helper()
	e := map[string]string{
		"SVC_JWKS_URL":               k.jwks.URL,
		"SVC_BUNDLE_URL":             cpURL + "/svc.tar.gz",
		"SVC_BUNDLE_VERIFY_KEY_FILE": verifyKeyFile,
	}
	maps.Copy(e, env)
	return harness.StartSidecar(t, harness.SidecarOptions{Config: pollingConfig, Env: e})
}

// refusedActivations matches the metric of bundles refused for reason.
func refusedActivations(reason string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^svc_policy_bundle_activations_total\{[^}]*reason="` + regexp.QuoteMeta(reason) +
		`"[^}]*result="refused"[^}]*source="bundle_url"[^}]*\} [1-9]`)
}

// TestBundleRollbackAttack: a sidecar polls its control plane and
// activates bundle cp-2. It is stopped and started again without
// policy.bundle_cache_dir, under systemd's StateDirectory= (the
// $STATE_DIRECTORY it sets is the only state setting given). Whoever
// answers for the control plane now serves cp-1 first: older, validly
// signed, and letting viewers delete. The new process refuses it
// (policy-bundle-rollback) from the record of cp-2, in status, metrics and
// log; a viewer's DELETE stays denied; cp-2 itself is taken again.
func TestBundleRollbackAttack(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	b := newRollbackBundles(t)
	now := time.Now().UTC().Truncate(time.Second)
	cp1 := b.build(t, b.lax, "cp-1", now.Add(-2*time.Hour))
	cp2 := b.build(t, b.shipped, "cp-2", now.Add(-time.Hour))
	cp := startReplayServer(t, cp2)
	stateDir := t.TempDir()
	// Only what systemd's StateDirectory= sets: no harness default.
	env := map[string]string{"SVC_STATE_DIR": "", "STATE_DIRECTORY": stateDir}
	viewer := k.token(t, "mallory", "acme", "viewer")

	first := startPollingSidecar(t, k, cp.URL, b.verifyKeyFile, env)
	var st wire.Status
	testkit.Eventually(t, "cp-2 active", func() bool { st = getStatus(t, first); return st.PolicyRevision == "cp-2" })
	if st.PolicyState == nil || st.PolicyState.Revision != "cp-2" || !strings.HasPrefix(st.PolicyState.File, stateDir+"/") {
		t.Fatalf("cp-2 active: policy_state %+v, want cp-2 recorded under $STATE_DIRECTORY %s", st.PolicyState, stateDir)
	}
	first.Stop(t)

	// The replay, served to a process started afresh.
	cp.serve(cp1)
	second := startPollingSidecar(t, k, cp.URL, b.verifyKeyFile, env)
	testkit.Eventually(t, "the replayed cp-1 refused", func() bool {
		st = getStatus(t, second)
		return st.Bundle.LastErrorCode != "" || st.PolicyRevision == "cp-1"
	})
	if st.PolicyRevision == "cp-1" || st.PolicySource != "config" || st.Bundle.LastErrorCode != "policy-bundle-rollback" ||
		!strings.Contains(st.Bundle.LastError, `"cp-2"`) || st.Bundle.Partitioned {
		t.Fatalf("the replay of cp-1 after a restart: revision %q from %q, bundle %+v; want it refused with policy-bundle-rollback naming cp-2",
			st.PolicyRevision, st.PolicySource, *st.Bundle)
	}
	if r := envoyCheck(t, second, "DELETE", "/orders/1", viewer, nil); r.status != http.StatusForbidden {
		t.Errorf("a viewer's DELETE while cp-1 is served: %d %s, want 403", r.status, r.body)
	}
	recorded := regexp.MustCompile(`(?m)^Last bundle accepted:\s+revision cp-2, created ` + regexp.QuoteMeta(now.Add(-time.Hour).Format(time.RFC3339)) +
		` \(` + regexp.QuoteMeta(stateDir) + `/policy-bundle-[0-9a-f]{16}\.json\)$`)
	if _, stdout, stderr := runCoreAt(t, second, "sidecar", "status"); !recorded.MatchString(stdout) {
		t.Errorf("core sidecar status does not show the record of cp-2:\n%s%s", stdout, stderr)
	}
	if r := envoyCheck(t, second, "GET", "/orders/1", viewer, nil); r.status != http.StatusOK {
		t.Errorf("a viewer's GET while cp-1 is served: %d %s, want 200", r.status, r.body)
	}
	_, _, metrics := harness.Get(t, second.URL("/metrics"))
	if !refusedActivations("policy-bundle-rollback").Match(metrics) {
		t.Errorf("no refused policy-bundle-rollback activation in /metrics:\n%s", testkit.GrepLines(string(metrics), "svc_policy_bundle"))
	}
	logged := false
	for _, rec := range second.LogRecords(t) {
		if rec["code"] == "policy-bundle-rollback" && strings.Contains(rec["msg"].(string), "refused") {
			logged = true
		}
	}
	if !logged {
		t.Errorf("the refusal is not logged with its code:\n%s", second.Stderr.String())
	}

	// The control plane's own bundle is still taken.
	cp.serve(cp2)
	testkit.Eventually(t, "cp-2 active again", func() bool { st = getStatus(t, second); return st.PolicyRevision == "cp-2" })
	if st.Bundle.LastErrorCode != "" || st.Status != "healthy" {
		t.Errorf("cp-2 served again: status %q (%s), bundle %+v", st.Status, st.Reason, *st.Bundle)
	}
}

// TestBundleStaleRefusedAttack: with policy.bundle_max_age = 1h and
// policy.bundle_max_age_action = "refuse", a validly signed bundle
// created 2 h ago is never activated, whether a control plane serves it
// or it is uploaded; a viewer's DELETE stays denied; a fresh bundle is
// taken.
func TestBundleStaleRefusedAttack(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	b := newRollbackBundles(t)
	now := time.Now().UTC().Truncate(time.Second)
	stale := b.build(t, b.lax, "cp-old", now.Add(-2*time.Hour))
	cp := startReplayServer(t, stale)
	s := startPollingSidecar(t, k, cp.URL, b.verifyKeyFile, map[string]string{
		"SVC_BUNDLE_MAX_AGE":        "1h",
		"SVC_BUNDLE_MAX_AGE_ACTION": "refuse",
	})
	viewer := k.token(t, "mallory", "acme", "viewer")

	var st wire.Status
	testkit.Eventually(t, "the stale bundle refused", func() bool {
		st = getStatus(t, s)
		return st.Bundle.LastErrorCode != "" || st.PolicyRevision == "cp-old"
	})
	if st.PolicyRevision == "cp-old" || st.PolicySource != "config" || st.Bundle.LastErrorCode != "policy-bundle-stale" ||
		!strings.Contains(st.Bundle.LastError, "policy.bundle_max_age") {
		t.Fatalf("a bundle 2h old, max age 1h, refuse: revision %q from %q, bundle %+v; want it refused with policy-bundle-stale",
			st.PolicyRevision, st.PolicySource, *st.Bundle)
	}
	if r := envoyCheck(t, s, "DELETE", "/orders/1", viewer, nil); r.status != http.StatusForbidden {
		t.Errorf("a viewer's DELETE while the stale bundle is served: %d %s, want 403", r.status, r.body)
	}
	file := harness.WriteFile(t, t.TempDir(), "old.tar.gz", string(stale))
	if code, stdout, stderr := runCoreAt(t, s, "sidecar", "reload-policy", "--bundle", file, "--allow-downgrade"); code != 1 ||
		!strings.Contains(stdout+stderr, "policy-bundle-stale") {
		t.Errorf("core sidecar reload-policy --allow-downgrade of the stale bundle: exit %d\n%s%s; want 1, policy-bundle-stale", code, stdout, stderr)
	}
	if st = getStatus(t, s); st.PolicyRevision == "cp-old" {
		t.Errorf("the stale bundle is active after the upload")
	}
	_, _, metrics := harness.Get(t, s.URL("/metrics"))
	if !refusedActivations("policy-bundle-stale").Match(metrics) {
		t.Errorf("no refused policy-bundle-stale activation in /metrics:\n%s", testkit.GrepLines(string(metrics), "svc_policy_bundle"))
	}

	cp.serve(b.build(t, b.shipped, "cp-fresh", time.Now()))
	testkit.Eventually(t, "the fresh bundle active", func() bool { st = getStatus(t, s); return st.PolicyRevision == "cp-fresh" })
	if st.Status != "healthy" || st.Bundle.LastErrorCode != "" {
		t.Errorf("a fresh bundle: status %q (%s), bundle %+v", st.Status, st.Reason, *st.Bundle)
	}
}

// TestBundleRedirectAttack: the control plane at policy.bundle_url (plain
// http on loopback, as the rule allows) redirects the running sidecar's
// polls. To another origin on this host, the bundle comes without the
// bearer token; to plain http on a host off loopback, where a network
// attacker would read the token and serve a bundle of his choosing,
// nothing is asked there, the status says bundle-redirect-refused and the
// active bundle stays.
func TestBundleRedirectAttack(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	dir := t.TempDir()
	signKey, verifyKey := ecKeyPair(t, dir)
	token := harness.WriteFile(t, dir, "cp-token", "cp-token-9a7c\n")
	policies := filepath.Join(harness.ModuleRoot(t), "policies")
	build := func(revision string) []byte {
		t.Helper()
		out := filepath.Join(dir, revision+".tar.gz")
		if code, _, stderr := runCore(t, "policy", "bundle", "--dir", policies, "--sign-key", signKey, "--revision", revision, "--out", out); code != 0 {
			t.Fatalf("core policy bundle: %s", stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cdnBundle, evilBundle := build("cdn-1"), build("evil-2")

	var cdnLog, evilLog testkit.RequestLog
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cdnLog.Add(r)
		_, _ = w.Write(cdnBundle)
	}))
	t.Cleanup(cdn.Close)
	// A bundle server elsewhere on the network, reached over plain http.
	ip := testkit.NonLoopbackIPv4()
	if ip == "" {
		t.Skip("no non-loopback IPv4 address on this host")
	}
	evil := testkit.ServeOn(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		evilLog.Add(r)
		_, _ = w.Write(evilBundle)
	}))
	if evil == nil {
		t.Fatalf("cannot listen on %s", ip)
	}

	cp := testkit.StartRedirector(t, cdn.URL+"/svc.tar.gz")

	s := startPollingSidecar(t, k, cp.URL, verifyKey, map[string]string{"SVC_BUNDLE_TOKEN_FILE": token})
	var st wire.Status
	testkit.Eventually(t, "the redirected bundle active", func() bool { st = controlPlane(t, s); return st.PolicyRevision == "cdn-1" })
	for _, got := range cdnLog.List() {
		if strings.Contains(got.Authorization, "cp-token") {
			t.Fatalf("the bearer token went to another origin: %+v", got)
		}
	}

	cp.MoveTo(evil.URL + "/svc.tar.gz")
	testkit.Eventually(t, "the redirect refused", func() bool {
		st = controlPlane(t, s)
		return st.Bundle.LastErrorCode == "bundle-redirect-refused" || st.PolicyRevision != "cdn-1"
	})
	if st.PolicyRevision != "cdn-1" || !st.Bundle.Partitioned || !strings.Contains(st.Bundle.LastError, "refused") {
		t.Errorf("after a redirect to %s: revision %q, %+v; want cdn-1 kept and the redirect refused", evil.URL, st.PolicyRevision, *st.Bundle)
	}
	if got := evilLog.List(); len(got) > 0 {
		t.Errorf("the host off loopback was asked: %+v", got)
	}
}
