package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/wire"
)

// nonLoopbackIP is an address of this host outside loopback, where a
// test server stands for a host elsewhere on the network.
func nonLoopbackIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	t.Skip("no non-loopback IPv4 address on this host")
	return nil
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
	ln, err := net.Listen("tcp", net.JoinHostPort(nonLoopbackIP(t).String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	evil := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		evilLog.Add(r)
		_, _ = w.Write(evilBundle)
	})}}
	evil.Start()
	t.Cleanup(evil.Close)

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
