package sidecar

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// TestBundlePollAfterUpload: the poller asks with the ETag of the active
// bundle. Once an upload replaces the polled bundle, that ETag no longer
// describes what serves: the status stops showing it, the persisted ETag
// goes (a restart must not claim the upload is the control plane's
// bundle), and the next poll asks without If-None-Match.
func TestBundlePollAfterUpload(t *testing.T) {
	idp, signKey, verifyKey, dir := signedSetup(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	polled := buildBundleAt(t, dir, "v1", signKey, t0)

	var mu sync.Mutex
	var asked []string // If-None-Match of each poll
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("If-None-Match"))
		mu.Unlock()
		if r.Header.Get("If-None-Match") == `"e1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"e1"`)
		_, _ = w.Write(polled)
	}))
	t.Cleanup(srv.Close)
	polls := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}

	cfg := signedConfig(t, idp, verifyKey)
	cfg.Policy.BundleURL = srv.URL + "/bundle.tar.gz"
	cfg.Policy.BundleMinPoll = config.Duration{Duration: 20 * time.Millisecond}
	cfg.Policy.BundleMaxPoll = config.Duration{Duration: 20 * time.Millisecond}
	r := startSidecar(t, cfg)
	etagFile := filepath.Join(cfg.Policy.BundleCacheDir, cachedETagFile)
	testkit.Eventually(t, "the polled bundle active", func() bool {
		st := getStatus(t, r)
		return st.PolicyRevision == "v1" && st.Bundle != nil && st.Bundle.ETag == `"e1"`
	})
	if _, err := os.Stat(etagFile); err != nil {
		t.Fatalf("ETag of the polled bundle not persisted: %v", err)
	}

	code, body := post(t, r, PathReloadPolicy, buildBundleAt(t, dir, "v2", signKey, t0.Add(time.Hour)))
	if code != http.StatusOK {
		t.Fatalf("upload = %d %s", code, body)
	}
	n := len(polls())
	if st := getStatus(t, r); st.Bundle == nil || st.Bundle.ETag != "" {
		t.Errorf("status bundle after the upload = %+v, want no ETag: it is not the active bundle's", st.Bundle)
	}
	if _, err := os.Stat(etagFile); !os.IsNotExist(err) {
		t.Errorf("persisted ETag after the upload: stat = %v, want it removed", err)
	}
	testkit.Eventually(t, "a poll without If-None-Match after the upload", func() bool {
		for _, inm := range polls()[n:] {
			if inm == "" {
				return true
			}
		}
		return false
	})
	// The control plane's bundle is older than the upload: refused, the
	// upload keeps serving.
	testkit.Eventually(t, "the older polled bundle refused", func() bool {
		st := getStatus(t, r)
		return st.Bundle != nil && st.Bundle.LastError != ""
	})
	if st := getStatus(t, r); st.PolicyRevision != "v2" {
		t.Errorf("policy_revision = %q, want the upload's v2", st.PolicyRevision)
	}
}

// TestBundlePollJitter: polls come at a random interval between
// policy.bundle_min_poll and bundle_max_poll, so that a fleet started
// together does not poll in step.
func TestBundlePollJitter(t *testing.T) {
	p := newBundlePoller(config.Policy{BundleURL: "https://cp.example.com/b.tar.gz",
		BundleMinPoll: config.Duration{Duration: 60 * time.Second}, BundleMaxPoll: config.Duration{Duration: 120 * time.Second}})
	seen := map[time.Duration]bool{}
	lowHalf := 0
	for range 1000 {
		w := p.nextWait()
		if w < 60*time.Second || w >= 120*time.Second {
			t.Fatalf("wait %s outside [60s, 120s)", w)
		}
		if w < 90*time.Second {
			lowHalf++
		}
		seen[w] = true
	}
	// 1000 uniform draws: each half gets 500 ± 16 on average; 350 is
	// about nine standard deviations away.
	if len(seen) < 900 || lowHalf < 350 || lowHalf > 650 {
		t.Errorf("1000 waits: %d distinct, %d in the lower half; want spread over the interval", len(seen), lowHalf)
	}
	p.min, p.max = 5*time.Second, 5*time.Second
	if w := p.nextWait(); w != 5*time.Second {
		t.Errorf("min = max = 5s: wait %s", w)
	}
}

// TestBundlePollTooLarge: a polled bundle larger than
// policy.bundle_max_bytes is refused as an upload of it is, with reason
// bundle-too-large in the status, the log and the activations metric;
// the server answered, so the poller is not partitioned.
func TestBundlePollTooLarge(t *testing.T) {
	idp, _, verifyKey, _ := signedSetup(t)
	const limit = 1 << 20
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("ETag", `"big"`)
		_, _ = w.Write(make([]byte, limit+1))
	}))
	t.Cleanup(srv.Close)
	cfg := signedConfig(t, idp, verifyKey)
	cfg.Policy.BundleURL = srv.URL + "/bundle.tar.gz"
	cfg.Policy.BundleMaxBytes = limit
	cfg.Policy.BundleMinPoll = config.Duration{Duration: 20 * time.Millisecond}
	cfg.Policy.BundleMaxPoll = config.Duration{Duration: 20 * time.Millisecond}

	var logs testkit.SyncBuffer
	log, tel := newTestTelemetry(t, &logs, "info")
	eng, err := engine.New(cfg, engine.Deps{Logger: log, MeterProvider: tel.MeterProvider()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	r := startServer(t, Deps{Engine: eng, Telemetry: tel, Logger: log})
	testkit.Eventually(t, "the polled bundle refused", func() bool {
		st := getStatus(t, r)
		return st.Bundle != nil && st.Bundle.LastErrorCode != ""
	})
	st := getStatus(t, r).Bundle
	if st.LastErrorCode != "bundle-too-large" || st.Partitioned || !strings.HasPrefix(st.LastError, "bundle refused: ") {
		t.Errorf("status bundle = %+v, want it refused (bundle-too-large), not partitioned", st)
	}
	if !strings.Contains(logs.String(), `"code":"bundle-too-large"`) || strings.Contains(logs.String(), "unreachable") {
		t.Errorf("log = %s, want the bundle refused with code bundle-too-large", logs.String())
	}
	_, metrics := get(t, r, PathMetrics)
	refused := regexp.MustCompile(`(?m)^svc_policy_bundle_activations_total\{[^}]*reason="bundle-too-large"[^}]*result="refused"[^}]*source="bundle_url"[^}]*\} [1-9]`)
	if !refused.Match(metrics) {
		t.Errorf("metrics lack a bundle_url activation refused for bundle-too-large:\n%s", grepLines(metrics, "activations"))
	}
}

// grepLines is the lines of b that contain s.
func grepLines(b []byte, s string) string {
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

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
	tokenFile := testkit.TempFile(t, "token", []byte("cp-s3cret\n"))
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
	testkit.WriteFile(t, cfg.Policy.BundleTokenFile, []byte("cp-s3cret"))
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
