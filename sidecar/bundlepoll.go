package sidecar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/svc-dev/svc/internal/secretfile"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/loopback"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// sourceBundleURL tags a policy set polled from policy.bundle_url.
const sourceBundleURL = "bundle_url"

// cachedETagFile holds the ETag of the persisted bundle when it came from
// policy.bundle_url, so that a restarted sidecar asks with If-None-Match.
const cachedETagFile = "active-bundle.etag"

// bundleFetchTimeout bounds one poll of policy.bundle_url.
const bundleFetchTimeout = 30 * time.Second

// BundleStatus is the state of the policy.bundle_url poller in GET
// /v1/status.
type BundleStatus = wire.BundleStatus

// bundlePoller polls policy.bundle_url with the OPA bundle service
// protocol: GET with If-None-Match, 304 keeps the active bundle, 200
// brings a bundle that is verified and activated like an upload.
type bundlePoller struct {
	url       string
	tokenFile string
	min, max  time.Duration
	maxBytes  int64 // policy.bundle_max_bytes
	client    *http.Client

	mu       sync.Mutex
	etag     string
	synced   time.Time
	tried    time.Time
	since    time.Time // zero while not partitioned
	lastErr  string
	lastCode reason.Code
}

func newBundlePoller(p config.Policy) *bundlePoller {
	if p.BundleURL == "" {
		return nil
	}
	return &bundlePoller{
		url: p.BundleURL, tokenFile: p.BundleTokenFile,
		min: p.BundleMinPoll.Duration, max: p.BundleMaxPoll.Duration, maxBytes: bundleMaxBytes(p),
		// Every redirect hop obeys the rule bundle_url does (https, or
		// http on loopback), and the bearer token stays with the origin
		// of bundle_url.
		client: &http.Client{Timeout: bundleFetchTimeout, CheckRedirect: loopback.CheckRedirect},
	}
}

// pollBundles polls until ctx ends: once at once, then after a random
// interval between the configured minimum and maximum, so that a fleet
// of sidecars does not poll in step.
func (s *Server) pollBundles(ctx context.Context) {
	p := s.poller
	for {
		s.pollOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.nextWait()):
		}
	}
}

// nextWait is the interval before the next poll: uniform in [min, max).
func (p *bundlePoller) nextWait() time.Duration {
	if p.max <= p.min {
		return p.min
	}
	return p.min + rand.N(p.max-p.min)
}

// pollOnce fetches the bundle once and records the outcome.
func (s *Server) pollOnce(ctx context.Context) {
	p := s.poller
	now := time.Now()
	data, etag, err := p.fetch(ctx)
	if ctx.Err() != nil {
		return
	}
	// A bundle larger than policy.bundle_max_bytes is the server's
	// answer, refused as an upload of it would be: not an outage.
	var tooLarge *activateError
	if errors.As(err, &tooLarge) {
		err = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tried = now
	if err != nil {
		if p.since.IsZero() {
			p.since = now
			s.log.Warn("policy bundle server unreachable; the active policy keeps serving", "url", config.RedactURL(p.url), "err", err)
		}
		p.lastErr, p.lastCode = err.Error(), ""
		if errors.Is(err, loopback.ErrRedirectRefused) {
			p.lastCode = reason.BundleRedirectRefused
		}
		return
	}
	if !p.since.IsZero() {
		s.log.Info("policy bundle server answers again", "url", config.RedactURL(p.url), "partitioned_for", now.Sub(p.since).Round(time.Millisecond).String())
	}
	p.since = time.Time{}
	if data == nil && tooLarge == nil { // 304 Not Modified
		p.synced, p.lastErr, p.lastCode = now, "", ""
		return
	}
	if tooLarge != nil {
		s.countActivation(sourceBundleURL, tooLarge)
		err = tooLarge
	} else {
		_, err = s.activateBundle(data, sourceBundleURL, false)
	}
	if err != nil {
		// The server answered, with a bundle we refuse: keep the active
		// one, and keep asking with the old ETag until it is fixed.
		p.lastErr, p.lastCode = "bundle refused: "+err.Error(), activateCode(err)
		s.log.Warn("policy bundle from the control plane refused; the active policy stays", "url", config.RedactURL(p.url), "code", p.lastCode, "err", err)
		return
	}
	p.etag, p.synced, p.lastErr, p.lastCode = etag, now, "", ""
	if dir := s.deps.Engine.Config().Policy.BundleCacheDir; dir != "" {
		if err := writeFileAtomic(filepath.Join(dir, cachedETagFile), []byte(etag)); err != nil {
			s.log.Warn("bundle ETag not persisted", "err", err)
		}
	}
}

// fetch GETs the bundle. It returns nil data for 304 Not Modified.
func (p *bundlePoller) fetch(ctx context.Context) (data []byte, etag string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return nil, "", err
	}
	p.mu.Lock()
	if p.etag != "" {
		req.Header.Set("If-None-Match", p.etag)
	}
	p.mu.Unlock()
	req.Header.Set("Accept", "application/gzip, application/octet-stream")
	if p.tokenFile != "" {
		tok, err := secretfile.Read("policy.bundle_token_file", p.tokenFile)
		if err != nil {
			return nil, "", err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap() // the URL is logged beside it, redacted
		}
		return nil, "", err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil, "", nil
	case http.StatusOK:
		data, err := io.ReadAll(io.LimitReader(resp.Body, p.maxBytes+1))
		if err != nil {
			return nil, "", fmt.Errorf("read bundle: %w", err)
		}
		if int64(len(data)) > p.maxBytes {
			return nil, "", bundleTooLarge("the bundle served", p.maxBytes)
		}
		return data, resp.Header.Get("ETag"), nil
	}
	return nil, "", fmt.Errorf("bundle server answered %s", resp.Status)
}

// restoreETag loads the ETag persisted with a bundle from the URL.
func (p *bundlePoller) restoreETag(dir string) {
	if b, err := os.ReadFile(filepath.Join(dir, cachedETagFile)); err == nil {
		p.etag = string(bytes.TrimSpace(b))
	}
}

// forgetETag drops the ETag once an uploaded bundle replaced the polled
// one: it no longer describes the active bundle, so the next poll asks
// without If-None-Match, and a restart serving the persisted upload does
// not take it for the control plane's bundle.
func (p *bundlePoller) forgetETag(dir string, log *slog.Logger) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.etag = ""
	if dir == "" {
		return
	}
	if err := os.Remove(filepath.Join(dir, cachedETagFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		log.Warn("stale bundle ETag not removed: a restart would ask with it", "err", err)
	}
}

func (p *bundlePoller) status() BundleStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := BundleStatus{URL: config.RedactURL(p.url), ETag: p.etag, Partitioned: !p.since.IsZero(), LastError: p.lastErr, LastErrorCode: string(p.lastCode)}
	if !p.synced.IsZero() {
		t := p.synced
		st.LastSync = &t
	}
	if !p.tried.IsZero() {
		t := p.tried
		st.LastAttempt = &t
	}
	if st.Partitioned {
		t := p.since
		st.PartitionedSince = &t
	}
	return st
}
