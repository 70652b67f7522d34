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
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/ratelimit"
	"github.com/svc-dev/svc/engine/reason"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/sidecar/apijson"
)

// Paths of the admin surface of the local HTTP API.
const (
	PathHealthz      = "/healthz"
	PathReadyz       = "/readyz"
	PathMetrics      = "/metrics"
	PathStatus       = "/v1/status"
	PathConfig       = "/v1/config"
	PathReloadPolicy = "/v1/policy/reload"
)

// maxBundleBytes bounds an uploaded policy bundle.
const maxBundleBytes = 32 << 20

func (s *Server) registerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET "+PathHealthz, func(w http.ResponseWriter, _ *http.Request) {
		apijson.Write(w, http.StatusOK, map[string]string{"status": "ok"})
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

// Status is the body of GET /v1/status; `core sidecar status` prints it.
type Status struct {
	// Status agrees with readiness (GET /readyz): "healthy" (ready),
	// "degraded" (ready, but the JWKS cannot be refreshed and cached keys
	// are used), "unavailable" (not ready) or "draining" (shutting down).
	Status string `json:"status"`
	// Reason says why Status is not "healthy": the code /readyz gives
	// ("jwks-unavailable", "starting", "draining"), or
	// "saml-idp-metadata-unavailable" for a degraded SAML gateway, or
	// "policy-bundle-stale" when the active bundle is older than
	// policy.bundle_max_age.
	Reason           string     `json:"reason,omitempty"`
	Ready            bool       `json:"ready"`
	Partitioned      bool       `json:"partitioned"`
	PartitionedSince *time.Time `json:"partitioned_since,omitempty"`
	LastSync         *time.Time `json:"last_sync,omitempty"`
	CacheValid       bool       `json:"cache_valid"`
	CacheAge         string     `json:"cache_age,omitempty"`
	PoliciesLoaded   int        `json:"policies_loaded"`
	PolicyRevision   string     `json:"policy_revision"`
	// PolicySource is where the active policy set came from: "config"
	// (policy.dir or the embedded default), "upload", "cache" (the
	// bundle persisted in policy.bundle_cache_dir) or "bundle_url".
	PolicySource string `json:"policy_source"`
	// PolicyCreatedAt is the created_at the active bundle's signed
	// manifest records; absent when the active set is not a bundle or
	// records none.
	PolicyCreatedAt *time.Time `json:"policy_created_at,omitempty"`
	// PolicyHandoverRefused is set when the bundle served before the
	// last restart was refused by this image's configuration (for
	// example a new verification key): the configured policy serves and
	// the status is degraded (policy-handover-refused) until a bundle is
	// activated or the policy directory reloaded.
	PolicyHandoverRefused *HandoverRefusal `json:"policy_handover_refused,omitempty"`
	JWKSKeySets           int              `json:"jwks_key_sets_cached"`
	JWKSKeys              int              `json:"jwks_keys"`
	JWKSLastError         string           `json:"jwks_last_error,omitempty"`
	DevMode               bool             `json:"dev_mode"`
	PolicyMode            string           `json:"policy_mode"`
	TenantID              string           `json:"tenant_id"`
	Uptime                string           `json:"uptime"`
	// StartedAt is when this process image started; a restart changes
	// it while the PID stays the same.
	StartedAt time.Time    `json:"started_at"`
	PID       int          `json:"pid"`
	Version   string       `json:"version"`
	Audit     *audit.Stats `json:"audit,omitempty"`
	// SAML is the SAML gateway's state (IdP metadata, last good copy,
	// whether signatures are checked), present with [sdk.saml].
	SAML *samlgw.Status `json:"saml,omitempty"`
	// Bundle is the policy.bundle_url poller's state; absent without it.
	Bundle *BundleStatus `json:"bundle,omitempty"`
	// RateLimit is the Redis rate limiter's mode: the configured
	// rate_limit.redis_fallback, whether it is in force now (Redis
	// unreachable) and since when; absent without rate_limit.redis_addr.
	RateLimit *ratelimit.FallbackStatus `json:"rate_limit,omitempty"`
	Engine    engine.Status             `json:"-"`
}

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
		RateLimit:      es.RateLimit,
		Engine:         es,
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
	} else {
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
			st.Status, st.Reason = StatusDegraded, string(CodeBundleStale)
		}
	}
	if ref := s.handoverRefusal(); ref != nil {
		st.PolicyHandoverRefused = ref
		if st.Status == StatusHealthy {
			st.Status, st.Reason = StatusDegraded, string(CodeHandoverRefused)
		}
	}
	if s.saml != nil {
		ss := s.saml.Status()
		st.SAML = &ss
		if s.deps.Engine.Config().SDK.JWKSURL == "" {
			// SAML-only: the tokens are verified with local keys.
			st.CacheValid = true
		}
		if (!ss.IDPMetadata.Loaded || ss.IDPMetadata.Stale) && st.Status == StatusHealthy {
			st.Status, st.Reason = StatusDegraded, "saml-idp-metadata-unavailable"
		}
	}
	switch {
	case s.draining.Load():
		st.Status, st.Reason = StatusDraining, why
	case !ready:
		st.Status, st.Reason = StatusUnavailable, why
	}
	if s.deps.Audit != nil {
		a := s.deps.Audit.Stats()
		st.Audit = &a
	}
	return st
}

// Values of Status.Status.
const (
	StatusHealthy     = "healthy"
	StatusDegraded    = "degraded"
	StatusUnavailable = "unavailable"
	StatusDraining    = "draining"
)

// mergeBundleSync folds the bundle poller's state into the control-plane
// fields: partitioned when either the JWKS or the bundle server is, since
// the earlier of the two; the last sync is the older of the two, so that
// cache_age says how stale the oldest cached part is.
func mergeBundleSync(st *Status, bs BundleStatus) {
	if bs.Partitioned {
		st.Partitioned = true
		if st.Status == StatusHealthy {
			st.Status, st.Reason = StatusDegraded, "bundle-server-unreachable"
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
		return false, "draining"
	case !s.ready.Load():
		return false, "starting"
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
	if eng.Config().SDK.JWKSURL == "" {
		return true
	}
	es := eng.Status()
	return es.DevMode || es.JWKS.Keys > 0
}

func (s *Server) serveReadyz(w http.ResponseWriter, _ *http.Request) {
	ready, why := s.readiness()
	if ready {
		apijson.Write(w, http.StatusOK, map[string]any{"ready": true})
		return
	}
	apijson.Write(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reason": why})
}

func (s *Server) serveStatus(w http.ResponseWriter, _ *http.Request) {
	apijson.Write(w, http.StatusOK, s.status())
}

// serveConfig returns the effective configuration as TOML. It holds no
// secret: key material is only ever referenced by file path, and URLs
// lose their user information and query values.
func (s *Server) serveConfig(w http.ResponseWriter, _ *http.Request) {
	b, err := s.deps.Engine.Config().Redacted().MarshalTOML()
	if err != nil {
		apijson.Error(w, http.StatusInternalServerError, reason.PolicyError, "config could not be rendered")
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
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBundleBytes))
	if err != nil {
		apijson.Error(w, http.StatusRequestEntityTooLarge, reason.InputInvalid, fmt.Sprintf("bundle larger than %d bytes", maxBundleBytes))
		return
	}
	if len(body) == 0 {
		prev := s.deps.Engine.Policies().Revision()
		set, err := s.reloadDirectory(r.Context())
		if err != nil {
			s.log.Warn("policy reload failed; active policies kept", "err", err)
			writeActivateError(w, err)
			return
		}
		apijson.Write(w, http.StatusOK, s.reloaded("directory", set, prev, false))
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
	apijson.Write(w, http.StatusOK, s.reloaded("bundle", act.Set, act.Previous, act.Persisted))
}

func writeActivateError(w http.ResponseWriter, err error) {
	var ae *activateError
	if errors.As(err, &ae) {
		apijson.Error(w, ae.status, ae.code, ae.msg)
		return
	}
	apijson.Error(w, http.StatusInternalServerError, reason.PolicyError, err.Error())
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
