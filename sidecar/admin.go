package sidecar

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// Paths of the admin surface of the local HTTP API (package wire).
const (
	PathHealthz      = wire.PathHealthz
	PathReadyz       = wire.PathReadyz
	PathMetrics      = wire.PathMetrics
	PathStatus       = wire.PathStatus
	PathConfig       = wire.PathConfig
	PathReloadPolicy = wire.PathReloadPolicy
)

// bundleMaxBytes is policy.bundle_max_bytes, which bounds a bundle's
// archive and each of its files; its default where the configuration
// leaves it unset.
func bundleMaxBytes(p config.Policy) int64 {
	if p.BundleMaxBytes <= 0 {
		return config.DefaultBundleMaxBytes
	}
	return p.BundleMaxBytes
}

// bundleTooLarge is the refusal of a bundle over policy.bundle_max_bytes.
func bundleTooLarge(what string, limit int64) *activateError {
	return &activateError{http.StatusRequestEntityTooLarge, reason.BundleTooLarge, fmt.Sprintf(
		"%s is larger than policy.bundle_max_bytes allows (%d bytes for the archive and each file, %d for its files together)", what, limit, bundle.UnpackedFactor*limit)}
}

func (s *Server) registerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		wire.WriteJSON(w, http.StatusOK, wire.Indented, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET "+PathReadyz, s.serveReadyz)
	if t := s.deps.Telemetry; t != nil {
		mux.Handle("GET "+PathMetrics, t.MetricsHandler())
	}
	mux.HandleFunc("GET "+PathStatus, s.serveStatus)
	mux.HandleFunc("GET "+PathConfig, s.serveConfig)
	mux.HandleFunc("POST "+PathReloadPolicy, s.admin(s.serveReload))
	mux.HandleFunc("POST "+PathRestart, s.admin(s.serveRestart))
}

// Status is the body of GET /v1/status (package wire).
type Status = wire.Status

func (s *Server) status() Status {
	es := s.deps.Engine.Status()
	ready, why := s.readiness()
	st := Status{
		Status:         StatusHealthy,
		Ready:          ready,
		PoliciesLoaded: es.PolicyFiles,
		PolicyRevision: es.PolicyRevision,
		DevMode:        es.DevMode,
		PolicyMode:     es.PolicyMode,
		TenantID:       es.TenantID,
		Uptime:         time.Since(s.started).Round(time.Second).String(),
		StartedAt:      s.started,
		PID:            os.Getpid(),
		Version:        es.Version,
	}
	if !es.DevMode {
		j := es.JWKS
		st.Partitioned = j.Partitioned
		st.JWKSKeySets = j.KeySets
		st.JWKSKeys = j.Keys
		st.JWKSLastError = j.LastError
		st.CacheValid = j.Keys > 0
		if !j.LastSuccess.IsZero() {
			t := j.LastSuccess
			st.LastSync = &t
			st.CacheAge = time.Since(t).Round(time.Second).String()
		}
		if j.Partitioned {
			st.Status, st.Reason = StatusDegraded, string(reason.JWKSUnavailable)
			t := j.PartitionedSince
			st.PartitionedSince = &t
		}
		st.JWKSIssuers = jwksIssuers(es.Issuers)
	} else {
		st.CacheValid = true
	}
	if es.JWKS.Keys == 0 && s.deps.Engine.Config().SDK.JWKSURL == "" {
		// No JWKS to cache: API keys and local SAML tokens need none.
		st.CacheValid = true
	}
	if p := s.poller; p != nil {
		bs := p.status()
		st.Bundle = &bs
		mergeBundleSync(&st, bs)
	}
	st.PolicySource, _ = s.policySource()
	if created := s.activeCreatedAt(); !created.IsZero() {
		st.PolicyCreatedAt = &created
		maxAge := s.deps.Engine.Config().Policy.BundleMaxAge.Duration
		if maxAge > 0 && time.Since(created) > maxAge && st.Status == StatusHealthy {
			st.Status, st.Reason = StatusDegraded, string(reason.PolicyBundleStale)
		}
	}
	st.PolicyState = s.policyState()
	if ref := s.handoverRefusal(); ref != nil {
		st.PolicyHandoverRefused = ref
		if st.Status == StatusHealthy {
			st.Status, st.Reason = StatusDegraded, string(reason.PolicyHandoverRefused)
		}
	}
	if s.oidc != nil {
		os := s.oidc.Status()
		st.OIDC = &os
	}
	if s.saml != nil {
		ss := s.saml.Status()
		st.SAML = &ss
		if s.deps.Engine.Config().SDK.JWKSURL == "" {
			// SAML-only: the tokens are verified with local keys.
			st.CacheValid = true
		}
		if (!ss.IDPMetadata.Loaded || ss.IDPMetadata.Stale) && st.Status == StatusHealthy {
			st.Status, st.Reason = StatusDegraded, string(reason.SAMLIDPMetadataUnavailable)
		}
		if ss.SignatureCheckDisabled && st.Status != StatusUnavailable {
			// Ahead of every other degradation: while it lasts, whoever
			// reaches the sign-in listener signs in as anyone, and a
			// monitor that reads only the reason must see that first.
			st.Status, st.Reason = StatusDegraded, string(reason.SAMLSignatureCheckDisabled)
		}
	}
	switch {
	case s.draining.Load():
		st.Status, st.Reason = StatusDraining, why
	case !ready:
		st.Status, st.Reason = StatusUnavailable, why
	}
	if rl := es.RateLimit; rl != nil {
		st.RateLimit = &wire.RateLimitStatus{Mode: string(rl.Mode), Active: rl.Active, Since: rl.Since,
			Replicas: rl.Replicas, Fallbacks: rl.Fallbacks}
	}
	if s.redis != nil {
		rs := s.redis.status()
		st.Redis = &rs
		if rs.Evicts && st.Status == StatusHealthy {
			st.Status, st.Reason = StatusDegraded, string(reason.RedisEvictsKeys)
		}
	}
	if s.deps.Audit != nil {
		a := wire.AuditStats(s.deps.Audit.Stats())
		st.Audit = &a
	}
	if in := es.Introspection; in != nil {
		st.Introspection = &wire.IntrospectionStatus{URL: in.URL, Shared: in.Shared, CacheEntries: in.CacheEntries,
			Calls: in.Calls, Failures: in.Failures, LastError: in.LastError}
		if !in.LastErrorAt.IsZero() {
			t := in.LastErrorAt
			st.Introspection.LastErrorAt = &t
		}
	}
	if k := es.APIKeys; k != nil {
		st.APIKeys = &wire.APIKeysStatus{Path: k.Path, Keys: k.Keys, Loaded: k.Loaded, Refusals: k.Refusals, LastError: k.LastError}
		if k.LastError != "" && st.Status == StatusHealthy {
			// The file on disk is not the keys in force: a key revoked
			// there still works until the file is fixed.
			st.Status, st.Reason = StatusDegraded, string(reason.APIKeysFileRefused)
		}
	}
	if d := es.DecisionLog; d != nil {
		st.DecisionLog = &wire.DecisionLogStatus{Sink: d.Sink, Connected: d.Connected, SpoolBytes: d.SpoolBytes, Unsent: d.Unsent,
			Shipped: d.Shipped, Retries: d.Retries, Dropped: d.Dropped, Refused: d.Refused, LastError: d.LastError}
		if d.OldestUnsentAge > 0 {
			st.DecisionLog.OldestUnsentAge = d.OldestUnsentAge.Round(time.Millisecond).String()
		}
		switch {
		case st.Status != StatusHealthy:
		case d.Refusing:
			// Decisions are refused (503): worse than records lost.
			st.Status, st.Reason = StatusDegraded, string(reason.DecisionLogUnavailable)
		case d.Dropped > 0:
			// Records are lost: whoever relies on the log must know.
			st.Status, st.Reason = StatusDegraded, string(reason.DecisionLogDropped)
		case !d.Connected && d.Unsent > 0:
			st.Status, st.Reason = StatusDegraded, string(reason.DecisionLogUnavailable)
		}
	}
	if c := es.ClientCerts; c != nil {
		st.ClientCerts = &wire.ClientCertsStatus{TrustDomains: c.TrustDomains, Roles: c.Roles, Accepted: c.Accepted, Invalid: c.Invalid, Untrusted: c.Untrusted}
	}
	st.IdentityToken = s.identityStatus()
	return st
}

// Values of Status.Status.
const (
	StatusHealthy     = wire.StatusHealthy
	StatusDegraded    = wire.StatusDegraded
	StatusUnavailable = wire.StatusUnavailable
	StatusDraining    = wire.StatusDraining
)

// samlStatus is the gateway's state in its wire form.

// mergeBundleSync folds the bundle poller's state into the control-plane
// fields: partitioned when either the JWKS or the bundle server is, since
// the earlier of the two; the last sync is the older of the two, so that
// cache_age says how stale the oldest cached part is.
func mergeBundleSync(st *Status, bs BundleStatus) {
	if bs.Partitioned {
		st.Partitioned = true
		if st.Status == StatusHealthy {
			st.Status, st.Reason = StatusDegraded, string(reason.BundleServerUnreachable)
		}
		if st.PartitionedSince == nil || bs.PartitionedSince.Before(*st.PartitionedSince) {
			st.PartitionedSince = bs.PartitionedSince
		}
	}
	if bs.LastSync != nil && (st.LastSync == nil || bs.LastSync.Before(*st.LastSync)) {
		st.LastSync = bs.LastSync
	}
	if st.LastSync != nil {
		st.CacheAge = time.Since(*st.LastSync).Round(time.Second).String()
	}
}

// isReady: serving, not draining, and able to verify tokens (development
// mode, or at least one key cached).
func (s *Server) isReady() bool {
	ready, _ := s.readiness()
	return ready
}

// readiness is the one answer of /readyz and /v1/status: ready or not,
// and when not, why ("starting", "draining" or "jwks-unavailable").
func (s *Server) readiness() (bool, string) {
	switch {
	case s.draining.Load():
		return false, string(reason.Draining)
	case !s.ready.Load():
		return false, string(reason.Starting)
	}
	if !KeysReady(s.deps.Engine) {
		return false, string(reason.JWKSUnavailable)
	}
	return true, ""
}

// KeysReady reports whether eng can verify tokens: in development mode,
// without sdk.jwks_url (a SAML-only deployment: tokens come from the
// local issuer, whose keys the engine holds from the start), or with the
// JWKS's keys cached. Readiness and the restart handover both ask it.
func KeysReady(eng *engine.Engine) bool {
	es := eng.Status()
	if es.DevMode {
		return true
	}
	for _, is := range es.Issuers {
		if is.JWKS.Keys == 0 {
			return false
		}
	}
	return true
}

// jwksIssuers is what /v1/status shows of each identity provider's JWKS.
func jwksIssuers(list []engine.IssuerStatus) []wire.JWKSIssuer {
	if len(list) == 0 {
		return nil
	}
	out := make([]wire.JWKSIssuer, len(list))
	for i, is := range list {
		j := is.JWKS
		out[i] = wire.JWKSIssuer{
			Issuer: is.Issuer, URL: j.URL, KeySets: j.KeySets, Keys: j.Keys,
			LastError: j.LastError, Partitioned: j.Partitioned,
		}
		if !j.LastSuccess.IsZero() {
			t := j.LastSuccess
			out[i].LastSync = &t
		}
		if j.Partitioned {
			t := j.PartitionedSince
			out[i].PartitionedSince = &t
		}
	}
	return out
}

func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	ready, why := s.readiness()
	if ready {
		wire.WriteJSON(w, http.StatusOK, wire.Indented, map[string]any{"ready": true})
		return
	}
	wire.WriteJSON(w, http.StatusServiceUnavailable, wire.Indented, map[string]any{"ready": false, "reason": why})
}

func (s *Server) serveStatus(w http.ResponseWriter, _ *http.Request) {
	wire.WriteJSON(w, http.StatusOK, wire.Indented, s.status())
}

// serveConfig returns the effective configuration as TOML. It holds no
// secret: key material is only ever referenced by file path, and URLs
// lose their user information and query values.
func (s *Server) serveConfig(w http.ResponseWriter, _ *http.Request) {
	b, err := s.deps.Engine.Config().Redacted().MarshalTOML()
	if err != nil {
		wire.WriteError(w, http.StatusInternalServerError, wire.Indented, string(reason.PolicyError), "config could not be rendered")
		return
	}
	w.Header().Set("Content-Type", "application/toml")
	w.Write(b)
}

// serveReload reloads the policy directory (empty body) or activates an
// uploaded bundle (body: the tar.gz). A bundle must be signed by the
// configured policy.bundle_verify_key_file; without one configured,
// bundles are accepted only in development mode. With the key configured
// a directory reload is refused, and a bundle older than the active one
// is refused unless the query says allow_downgrade=true. On any error
// the active policy set stays.
func (s *Server) serveReload(w http.ResponseWriter, r *http.Request) {
	limit := bundleMaxBytes(s.deps.Engine.Config().Policy)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		writeActivateError(w, bundleTooLarge("the uploaded bundle", limit))
		return
	}
	if len(body) == 0 {
		prev := s.deps.Engine.Policies().Revision()
		// The key file is polled anyway; a reload takes a change now. A
		// refused file is logged and shown in the status by the engine.
		_ = s.deps.Engine.ReloadAPIKeys(r.Context())
		set, err := s.reloadDirectory(r.Context())
		if err != nil {
			s.log.Warn("policy reload failed; active policies kept", "err", err)
			writeActivateError(w, err)
			return
		}
		wire.WriteJSON(w, http.StatusOK, wire.Indented, s.reloaded("directory", set, prev, false))
		return
	}
	allowOlder, _ := strconv.ParseBool(r.URL.Query().Get("allow_downgrade"))
	act, err := s.activateBundle(body, sourceUpload, allowOlder)
	if err != nil {
		s.log.Warn("policy bundle refused; active policies kept", "err", err)
		writeActivateError(w, err)
		return
	}
	if s.poller != nil {
		// Outside the bundle lock: a poll holds the poller's lock while
		// it activates.
		s.poller.forgetETag(s.deps.Engine.Config().Policy.BundleCacheDir, s.log)
	}
	wire.WriteJSON(w, http.StatusOK, wire.Indented, s.reloaded("bundle", act.Set, act.Previous, act.Persisted))
}

func writeActivateError(w http.ResponseWriter, err error) {
	var ae *activateError
	if errors.As(err, &ae) {
		wire.WriteError(w, ae.status, wire.Indented, string(ae.code), ae.msg)
		return
	}
	wire.WriteError(w, http.StatusInternalServerError, wire.Indented, string(reason.PolicyError), err.Error())
}

func (s *Server) bundleVerification() (*bundle.VerifyOptions, error) {
	cfg := s.deps.Engine.Config()
	if cfg.Policy.BundleVerifyKeyFile == "" {
		if s.deps.Engine.DevMode() {
			return nil, nil
		}
		return nil, errors.New("no policy.bundle_verify_key_file is configured: bundles are accepted unsigned only in development mode")
	}
	pem, err := os.ReadFile(cfg.Policy.BundleVerifyKeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot read %s: %w", cfg.Setting("policy.bundle_verify_key_file"), cfg.Policy.BundleVerifyKeyFile, unwrapPath(err))
	}
	return &bundle.VerifyOptions{PublicKeyPEM: pem}, nil
}

func (s *Server) reloaded(source string, set *policy.Set, previous string, persisted bool) map[string]any {
	return map[string]any{"reloaded": true, "source": source, "revision": set.Revision(),
		"previous_revision": previous, "policies_loaded": len(set.Files()), "persisted": persisted}
}

// unwrapPath drops the "open <path>:" of an *fs.PathError, for messages
// that name the setting instead.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
