package sidecar

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// cachedBundleFile is the name of the persisted active bundle inside
// policy.bundle_cache_dir.
const cachedBundleFile = "active-bundle.tar.gz"

// Sources of the active policy set, as status reports them.
const (
	sourceConfig = "config" // policy.dir or the embedded default
	sourceUpload = "upload"
	sourceCache  = "cache"
)

// bundles activates policy bundles one at a time: verify, order, swap,
// persist. It remembers the active bundle to refuse older ones.
type bundles struct {
	mu     sync.Mutex
	active *bundle.Info // nil while the active set does not come from a bundle
	data   []byte       // the active bundle as received, signature included
	source string
	at     time.Time
	// refused is why the bundle carried over from the previous image (or
	// persisted in policy.bundle_cache_dir) was not activated; cleared by
	// the next activation.
	refused *HandoverRefusal
	// state records the last accepted signed bundle in sidecar.state_dir.
	state bundleState
}

// CarriedBundle is the bundle the previous process image served, handed
// to the next one across a restart: its bytes as received (signature
// included) and where it came from ("upload" or "bundle_url").
type CarriedBundle struct {
	Data   []byte
	Source string
}

// HandoverRefusal says why the new image did not activate the bundle the
// previous one served, and so serves the configured policy.
type HandoverRefusal = wire.HandoverRefusal

// activation is the outcome of activating a bundle.
type activation struct {
	Info      bundle.Info
	Set       *policy.Set
	Previous  string
	Persisted bool
}

// activateError is a refused activation with its HTTP status and code.
type activateError struct {
	status int
	code   reason.Code
	msg    string
}

func (e *activateError) Error() string { return e.msg }

// activateCode is the reason code of an activation's refusal: the
// *activateError's, else policy-error.
func activateCode(err error) reason.Code {
	if ae, ok := errors.AsType[*activateError](err); ok {
		return ae.code
	}
	return reason.PolicyError
}

// activateBundle verifies and compiles data and, unless it is older than
// the active bundle or the last one recorded in sidecar.state_dir and
// allowOlder is false, swaps it in, persists it to
// policy.bundle_cache_dir and records it. Under
// policy.bundle_max_age_action = "refuse" a bundle older than
// policy.bundle_max_age is refused whatever allowOlder says. On any error
// the active set stays. Every outcome is counted in the metrics.
func (s *Server) activateBundle(data []byte, source string, allowOlder bool) (activation, error) {
	act, err := s.activate(data, source, allowOlder)
	s.countActivation(source, err)
	return act, err
}

// bundleLoader opens bundles within lim, holding the collector's target
// through Deps.GC while each loads.
func (s *Server) bundleLoader(lim bundle.Limits) bundle.Loader {
	return bundle.Loader{Limits: lim, GC: s.deps.GC}
}

func (s *Server) activate(data []byte, source string, allowOlder bool) (activation, error) {
	// Data that is not a bundle at all says so, whatever the signing
	// configuration.
	limit := bundleMaxBytes(s.deps.Engine.Config().Policy)
	lim := bundle.LimitsOf(limit)
	if err := bundle.CheckArchiveWithin(bytes.NewReader(data), lim); errors.Is(err, bundle.ErrTooLarge) {
		return activation{}, bundleTooLarge("bundle ("+err.Error()+")", limit)
	} else if err != nil {
		return activation{}, &activateError{http.StatusBadRequest, reason.BundleMalformed,
			"malformed bundle: " + err.Error() + " (send a .tar.gz made by core policy bundle, or an empty body to re-read policy.dir)"}
	}
	verify, err := s.bundleVerification()
	if err != nil {
		return activation{}, &activateError{http.StatusBadRequest, reason.InputInvalid, err.Error()}
	}
	set, info, err := s.bundleLoader(lim).Open(bytes.NewReader(data), verify, engine.PolicyOptions(s.deps.Engine.Config())...)
	if ve := (*bundle.VerificationError)(nil); errors.As(err, &ve) {
		return activation{}, &activateError{http.StatusUnprocessableEntity, reason.BundleSignatureInvalid,
			"bundle rejected: " + err.Error() + "; sign it with the private key whose public key is policy.bundle_verify_key_file"}
	}
	if err != nil {
		return activation{}, &activateError{http.StatusUnprocessableEntity, policy.ReasonOf(err), "bundle rejected: " + err.Error()}
	}
	if source == sourceBundleURL && info.CreatedAt.IsZero() {
		// A control plane's bundles are ordered by the creation time
		// their signed manifest records; one without it would let
		// whoever can answer for the server replay any older signed
		// bundle.
		return activation{}, &activateError{http.StatusUnprocessableEntity, reason.BundleUnordered, fmt.Sprintf(
			"bundle revision %q records no created_at in its signed manifest metadata, so it cannot be ordered against the active bundle; build it with core policy bundle", info.Revision)}
	}
	now := time.Now()
	if err := s.refuseStale(info, now); err != nil {
		return activation{}, err
	}
	var key string // the verification key's fingerprint: "" for unchecked bundles
	if verify != nil {
		key = keyFingerprint(verify.PublicKeyPEM)
	}
	b := &s.bundles
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active != nil && !allowOlder && olderBundle(info, *b.active) {
		return activation{}, &activateError{http.StatusConflict, reason.RevisionOlder, fmt.Sprintf(
			"bundle revision %q is older than the active revision %q; ask for it explicitly to go back", info.Revision, b.active.Revision)}
	}
	last, err := b.state.last(key)
	if err != nil {
		s.log.Error("the record of the last accepted bundle cannot be read; bundles are not ordered against it", "err", err)
	}
	if last != nil && !allowOlder && olderBundle(info, last.info()) {
		return activation{}, &activateError{http.StatusConflict, reason.PolicyBundleRollback, fmt.Sprintf(
			"bundle revision %q%s is older than revision %q%s, the last bundle accepted under this verification key (recorded in %s); upload it with allow_downgrade=true to go back on purpose",
			info.Revision, createdNote(info.CreatedAt), last.Revision, createdNote(last.CreatedAt), b.state.path(key))}
	}
	old := s.deps.Engine.SetPolicies(set)
	b.active, b.data, b.source, b.at, b.refused = &info, data, source, now, nil
	act := activation{Info: info, Set: set, Previous: old.Revision()}
	if dir := s.deps.Engine.Config().Policy.BundleCacheDir; dir != "" && source != sourceCache {
		if err := writeFileAtomic(filepath.Join(dir, cachedBundleFile), data); err != nil {
			s.log.Error("active bundle not persisted: a restart would serve the previous one", "setting", s.deps.Engine.Config().Setting("policy.bundle_cache_dir"), "err", err)
		} else {
			act.Persisted = true
		}
	}
	if key != "" {
		// After the cache: a record newer than the cached bundle would
		// refuse it at the next start.
		sum := sha256.Sum256(data)
		rec := bundleRecord{Key: key, Revision: info.Revision, CreatedAt: info.CreatedAt,
			Digest: hex.EncodeToString(sum[:]), Source: source, AcceptedAt: now}
		if last == nil || last.Digest != rec.Digest || b.state.lastErr != "" {
			if err := b.state.record(rec); err != nil {
				s.log.Error("last accepted bundle not recorded: a new process could take an older one", "setting", s.deps.Engine.Config().Setting("sidecar.state_dir"), "err", err)
			}
		}
	}
	s.log.Info("policy bundle activated", "revision", info.Revision, "previous_revision", old.Revision(),
		"source", source, "files", len(set.Files()), "persisted", act.Persisted)
	return act, nil
}

// refuseStale refuses a bundle created longer than policy.bundle_max_age
// ago, or one whose age cannot be told, when
// policy.bundle_max_age_action is "refuse".
func (s *Server) refuseStale(info bundle.Info, now time.Time) error {
	cfg := s.deps.Engine.Config()
	maxAge := cfg.Policy.BundleMaxAge.Duration
	if cfg.Policy.BundleMaxAgeAction != config.BundleMaxAgeRefuse || maxAge <= 0 {
		return nil
	}
	if info.CreatedAt.IsZero() {
		return &activateError{http.StatusUnprocessableEntity, reason.BundleUnordered, fmt.Sprintf(
			"bundle revision %q records no created_at in its signed manifest metadata, so its age cannot be checked against %s; build it with core policy bundle",
			info.Revision, cfg.Setting("policy.bundle_max_age"))}
	}
	if age := now.Sub(info.CreatedAt); age > maxAge {
		return &activateError{http.StatusUnprocessableEntity, reason.PolicyBundleStale, fmt.Sprintf(
			"bundle revision %q was created %s, %s ago, longer than %s = %s allows (%s = %q); publish a newer bundle",
			info.Revision, info.CreatedAt.UTC().Format(time.RFC3339), age.Round(time.Second), cfg.Setting("policy.bundle_max_age"), maxAge,
			cfg.Setting("policy.bundle_max_age_action"), config.BundleMaxAgeRefuse)}
	}
	return nil
}

// createdNote is " (created <time>)", or "" for a zero time.
func createdNote(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " (created " + t.UTC().Format(time.RFC3339) + ")"
}

// reloadDirectory reloads policy.dir (or the embedded default). With a
// verification key configured only signed bundles may change the policy,
// so it is refused.
func (s *Server) reloadDirectory(ctx context.Context) (*policy.Set, error) {
	e := s.deps.Engine
	if e.Config().Policy.BundleVerifyKeyFile != "" {
		return nil, &activateError{http.StatusConflict, reason.SignedBundleRequired,
			"policy.bundle_verify_key_file is set: only a signed bundle can replace the policy; upload one"}
	}
	b := &s.bundles
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := e.ReloadPolicies(ctx); err != nil {
		return nil, &activateError{http.StatusUnprocessableEntity, policy.ReasonOf(err), err.Error()}
	}
	b.active, b.data, b.source, b.at, b.refused = nil, nil, sourceConfig, time.Now(), nil
	if dir := e.Config().Policy.BundleCacheDir; dir != "" {
		// The directory is what a restart must serve now.
		if err := os.Remove(filepath.Join(dir, cachedBundleFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Error("persisted bundle not removed: a restart would serve it", "err", err)
		}
	}
	return e.Policies(), nil
}

// ReloadPolicies reloads policy.dir (or the embedded default) as an
// empty-body POST /v1/policy/reload does, and re-reads api_keys.file and
// identity_token.signing_key_file if they changed; SIGHUP calls it. A
// refused key file is logged and shown in the status, and does not stop
// the policy reload.
func (s *Server) ReloadPolicies(ctx context.Context) error {
	_ = s.deps.Engine.ReloadAPIKeys(ctx)
	if s.identity != nil {
		_, _ = s.identity.Reload()
	}
	_, err := s.reloadDirectory(ctx)
	return err
}

// PolicyRevision is the revision of the active policy set.
func (s *Server) PolicyRevision() string { return s.deps.Engine.Policies().Revision() }

// restoreBundle activates the bundle persisted in policy.bundle_cache_dir,
// if any, and reports whether it did. It is ordered against the record of
// the last accepted bundle like any other: a cache replaced by an older
// bundle is refused. A persisted bundle refused is logged and reported in
// status as a refused hand-over: the configured policy serves.
func (s *Server) restoreBundle() bool {
	dir := s.deps.Engine.Config().Policy.BundleCacheDir
	if dir == "" {
		return false
	}
	data, err := os.ReadFile(filepath.Join(dir, cachedBundleFile))
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err == nil {
		_, err = s.activateBundle(data, sourceCache, false)
	}
	if err != nil {
		ref := s.refuseHandover(err)
		s.log.Warn("persisted policy bundle not restored; serving the configured policy", "dir", dir, "code", ref.Code, "err", err)
		return false
	}
	return true
}

// ActiveBundle returns the active bundle as it was received and where it
// came from, or nil when the active set does not come from a bundle. A
// restart hands it to the next image (Deps.Carried).
func (s *Server) ActiveBundle() *CarriedBundle {
	b := &s.bundles
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active == nil || b.data == nil {
		return nil
	}
	return &CarriedBundle{Data: b.data, Source: b.source}
}

// activateCarried activates the bundle the previous image served, as
// received: verified again with this image's key and compiled again. A
// refusal is logged and reported in status; the configured policy serves.
func (s *Server) activateCarried(c *CarriedBundle) bool {
	if c == nil {
		return false
	}
	source := c.Source
	switch source {
	case sourceUpload, sourceBundleURL, sourceCache:
	default:
		source = sourceUpload
	}
	if dir := s.deps.Engine.Config().Policy.BundleCacheDir; dir != "" {
		// The same bundle persisted: served from the cache, as a new
		// process would serve it, and not written again.
		if cached, err := os.ReadFile(filepath.Join(dir, cachedBundleFile)); err == nil && bytes.Equal(cached, c.Data) {
			source = sourceCache
		}
	}
	// The previous image had accepted it, possibly as an explicit
	// downgrade: nothing active here can be newer.
	act, err := s.activateBundle(c.Data, source, true)
	if err != nil {
		ref := s.refuseHandover(err)
		s.log.Error("the policy bundle served before the restart is refused by this configuration; serving the configured policy",
			"code", ref.Code, "err", err, "revision", s.PolicyRevision())
		return false
	}
	s.log.Info("policy bundle served before the restart activated", "revision", act.Info.Revision, "source", source)
	return true
}

// refuseHandover records err, the refusal of a persisted or carried
// bundle, as the refusal that status reports, and returns it.
func (s *Server) refuseHandover(err error) *HandoverRefusal {
	ref := &HandoverRefusal{Code: string(activateCode(err)), Message: err.Error()}
	s.bundles.mu.Lock()
	s.bundles.refused = ref
	s.bundles.mu.Unlock()
	return ref
}

// handoverRefusal is the refusal of the carried bundle, nil when none.
func (s *Server) handoverRefusal() *HandoverRefusal {
	b := &s.bundles
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.refused
}

// activeCreatedAt is the created_at of the active bundle: zero when the
// active set is not a bundle or its manifest records none.
func (s *Server) activeCreatedAt() time.Time {
	b := &s.bundles
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active == nil {
		return time.Time{}
	}
	return b.active.CreatedAt
}

// policySource reports where the active set came from and when.
func (s *Server) policySource() (string, time.Time) {
	b := &s.bundles
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.source == "" {
		return sourceConfig, s.started
	}
	return b.source, b.at
}

// olderBundle orders bundles by the creation time their signed manifest
// records; without it on both sides, by revision when both are
// integers. Bundles that cannot be ordered are not older.
func olderBundle(next, active bundle.Info) bool {
	if !next.CreatedAt.IsZero() && !active.CreatedAt.IsZero() {
		return next.CreatedAt.Before(active.CreatedAt)
	}
	n, err1 := strconv.ParseUint(next.Revision, 10, 64)
	a, err2 := strconv.ParseUint(active.Revision, 10, 64)
	return err1 == nil && err2 == nil && n < a
}

// writeFileAtomic replaces path with data so that a crash leaves either
// the old or the new content, never a torn file.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
