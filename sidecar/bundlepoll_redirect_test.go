package sidecar

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// TestBundleFetchRedirectTLS: an https bundle_url redirecting to plain
// http off loopback is refused before any request goes there; one
// redirecting to another https origin (another port of the same host,
// where net/http would keep the header) gets the bundle without the
// bearer token.
func TestBundleFetchRedirectTLS(t *testing.T) {
	var other testkit.RequestLog
	otherSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.Add(r)
		_, _ = w.Write([]byte("bundle bytes"))
	}))
	t.Cleanup(otherSrv.Close)
	var origin testkit.RequestLog
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin.Add(r)
		switch r.URL.Path {
		case "/downgrade":
			http.Redirect(w, r, "http://cp.example.invalid/svc.tar.gz", http.StatusFound)
		case "/elsewhere":
			http.Redirect(w, r, otherSrv.URL+"/svc.tar.gz", http.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("cp-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	poller := func(path string) *bundlePoller {
		p := newBundlePoller(config.Policy{BundleURL: srv.URL + path, BundleTokenFile: tokenFile})
		p.client.Transport = srv.Client().Transport // trusts httptest's certificate
		return p
	}

	_, _, err := poller("/downgrade").fetch(context.Background())
	if !errors.Is(err, loopback.ErrRedirectRefused) || !strings.Contains(err.Error(), "http://cp.example.invalid") {
		t.Errorf("https redirecting to plain http: fetch error %v, want the redirect refused", err)
	}

	data, _, err := poller("/elsewhere").fetch(context.Background())
	if err != nil || string(data) != "bundle bytes" {
		t.Fatalf("https redirecting to another https origin: %q, %v", data, err)
	}
	if got := origin.List(); len(got) != 2 || got[0].Authorization != "Bearer cp-s3cret" {
		t.Errorf("bundle_url's origin got %+v, want the token", got)
	}
	if got := other.List(); len(got) != 1 || got[0].Authorization != "" {
		t.Errorf("another origin got %+v, want no Authorization", got)
	}
}

// TestBundlePollRedirect: a running sidecar follows its bundle server's
// redirect to another loopback origin without the token, and refuses one
// to plain http off loopback, which it reports with a stable code while
// the active bundle keeps serving.
func TestBundlePollRedirect(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	polled := buildBundleAt(t, dir, "cdn-1", signKey, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))

	var cdn testkit.RequestLog
	cdnSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cdn.Add(r)
		w.Header().Set("ETag", `"c1"`)
		_, _ = w.Write(polled)
	}))
	t.Cleanup(cdnSrv.Close)
	cp := testkit.StartRedirector(t, cdnSrv.URL+"/svc.tar.gz")

	cfg := signedConfig(t, idp, verifyKey)
	cfg.Policy.BundleURL = cp.URL + "/svc.tar.gz"
	cfg.Policy.BundleTokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(cfg.Policy.BundleTokenFile, []byte("cp-s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Policy.BundleMinPoll = config.Duration{Duration: 20 * time.Millisecond}
	cfg.Policy.BundleMaxPoll = config.Duration{Duration: 20 * time.Millisecond}
	r := startSidecar(t, cfg)
	testkit.Eventually(t, "the redirected bundle active", func() bool { return getStatus(t, r).PolicyRevision == "cdn-1" })
	for _, a := range cdn.List() {
		if a.Authorization != "" {
			t.Fatalf("the bearer token went to another origin: %q", a.Authorization)
		}
	}

	cp.MoveTo("http://cp.example.invalid/svc.tar.gz") // plain http off loopback
	var st Status
	testkit.Eventually(t, "the redirect refused", func() bool {
		st = getStatus(t, r)
		return st.Bundle != nil && st.Bundle.LastErrorCode == string(reason.BundleRedirectRefused)
	})
	if !st.Bundle.Partitioned || !strings.Contains(st.Bundle.LastError, "redirect to http://cp.example.invalid refused") || st.PolicyRevision != "cdn-1" {
		t.Errorf("after a redirect to plain http: %+v, revision %q", *st.Bundle, st.PolicyRevision)
	}
}
