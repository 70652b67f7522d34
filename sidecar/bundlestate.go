package sidecar

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/wire"
)

// bundleStatePrefix and bundleStateSuffix frame the name of a record in
// the state directory: one file per verification key, named after the
// start of its fingerprint, so that sidecars with other keys sharing the
// directory keep their own.
const (
	bundleStatePrefix = "policy-bundle-"
	bundleStateSuffix = ".json"
)

// PolicyState is the status's view of the record (package wire).
type PolicyState = wire.PolicyState

// bundleRecord is what the state file keeps of the last accepted bundle:
// what orders the next one, and what tells an operator which bundle it
// was. Nothing in it is secret.
type bundleRecord struct {
	// Key is the SHA-256 of the verification key (its DER), hex.
	Key      string `json:"key"`
	Revision string `json:"revision"`
	// CreatedAt is the created_at of the bundle's signed manifest, zero
	// when it records none (then the revision orders, as in memory).
	CreatedAt time.Time `json:"created_at,omitzero"`
	// Digest is the SHA-256 of the bundle as received, hex.
	Digest     string    `json:"digest"`
	Source     string    `json:"source"`
	AcceptedAt time.Time `json:"accepted_at"`
}

// info is the record as the ordering rule (olderBundle) takes it.
func (r bundleRecord) info() bundle.Info {
	return bundle.Info{Revision: r.Revision, CreatedAt: r.CreatedAt}
}

// bundleState reads and writes the records of the state directory. The
// bundles lock guards it.
type bundleState struct {
	dir string // "" when no state directory was configured or found
	// key is the fingerprint whose record rec holds (nil: none yet).
	key     string
	rec     *bundleRecord
	lastErr string
}

// keyFingerprint is the SHA-256 of a PEM public key's DER, so that the
// same key written with other line breaks or comments is the same key.
func keyFingerprint(pemBytes []byte) string {
	der := pemBytes
	if block, _ := pem.Decode(pemBytes); block != nil {
		der = block.Bytes
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// path is the record file of a key fingerprint.
func (st *bundleState) path(key string) string {
	return filepath.Join(st.dir, bundleStatePrefix+key[:16]+bundleStateSuffix)
}

// last returns the record of the last bundle accepted under key, nil when
// there is none. A record that cannot be read is reported in lastErr and
// taken as none: whoever can corrupt the file can as well delete it, and
// the next activation writes a good one.
func (st *bundleState) last(key string) (*bundleRecord, error) {
	if st.dir == "" || key == "" {
		return nil, nil
	}
	if st.key == key {
		return st.rec, nil
	}
	st.key, st.rec = key, nil
	data, err := os.ReadFile(st.path(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		st.lastErr = err.Error()
		return nil, err
	}
	var rec bundleRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		st.lastErr = fmt.Sprintf("%s: %v", st.path(key), err)
		return nil, errors.New(st.lastErr)
	}
	if rec.Key != key {
		// Another key whose fingerprint starts alike: not ours.
		return nil, nil
	}
	st.rec = &rec
	return st.rec, nil
}

// record replaces the record of rec.Key, atomically and durably, and keeps
// it as the one to order the next bundle against even if writing fails.
func (st *bundleState) record(rec bundleRecord) error {
	if st.dir == "" || rec.Key == "" {
		return nil
	}
	st.key, st.rec = rec.Key, &rec
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(st.path(rec.Key), append(data, '\n')); err != nil {
		st.lastErr = err.Error()
		return err
	}
	st.lastErr = ""
	return nil
}

// status is the record as GET /v1/status shows it.
func (st *bundleState) status() *PolicyState {
	ps := &PolicyState{LastError: st.lastErr}
	switch {
	case st.dir == "":
		return ps
	case st.key == "":
		// The key could not be read yet: no file is known, the
		// directory is.
		ps.File = st.dir
		return ps
	}
	ps.File = st.path(st.key)
	if r := st.rec; r != nil {
		ps.Revision = r.Revision
		if !r.CreatedAt.IsZero() {
			t := r.CreatedAt
			ps.CreatedAt = &t
		}
	}
	return ps
}

// stateDirDefault is the state directory of a package install, used when
// it exists and nothing names another.
const stateDirDefault = "/var/lib/svc"

// resolveStateDir finds the state directory: the configured one, else
// systemd's $STATE_DIRECTORY (StateDirectory=; the first of a list), else
// $XDG_STATE_HOME/svc, else stateDirDefault when it is a directory. It
// returns "" when none applies, and what named the directory.
func resolveStateDir(configured string, getenv func(string) string, isDir func(string) bool) (dir, from string) {
	if configured != "" {
		return configured, "sidecar.state_dir"
	}
	if v, _, _ := strings.Cut(getenv("STATE_DIRECTORY"), ":"); v != "" {
		return v, "$STATE_DIRECTORY"
	}
	if v := getenv("XDG_STATE_HOME"); filepath.IsAbs(v) {
		return filepath.Join(v, "svc"), "$XDG_STATE_HOME"
	}
	if isDir(stateDirDefault) {
		return stateDirDefault, stateDirDefault
	}
	return "", ""
}

// initBundleState finds the state directory and reads the record of the
// configured verification key, before any bundle is activated. Without a
// key no bundle is checked, so none is recorded.
func (s *Server) initBundleState() {
	cfg := s.deps.Engine.Config()
	if cfg.Policy.BundleVerifyKeyFile == "" {
		return
	}
	dir, from := resolveStateDir(cfg.Sidecar.StateDir, os.Getenv, isDir)
	if from == "sidecar.state_dir" {
		from = cfg.Setting("sidecar.state_dir")
	}
	st := &s.bundles.state
	st.dir = dir
	if dir == "" {
		s.log.Warn("no state directory: a new process started without policy.bundle_cache_dir accepts a signed bundle older than the last one accepted; set sidecar.state_dir")
		return
	}
	pemBytes, err := os.ReadFile(cfg.Policy.BundleVerifyKeyFile)
	if err != nil {
		// Every bundle is refused until the key can be read, and says so.
		return
	}
	rec, err := st.last(keyFingerprint(pemBytes))
	switch {
	case err != nil:
		s.log.Error("the record of the last accepted bundle cannot be read; bundles are not ordered against it", "from", from, "err", err)
	case rec != nil:
		s.log.Info("bundles older than the last one accepted are refused", "file", st.path(rec.Key), "from", from,
			"revision", rec.Revision, "created_at", rec.CreatedAt)
	}
}

// policyState is the record as status shows it; nil without a
// verification key.
func (s *Server) policyState() *PolicyState {
	if s.deps.Engine.Config().Policy.BundleVerifyKeyFile == "" {
		return nil
	}
	b := &s.bundles
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state.status()
}

// countActivation counts an activation's outcome in
// svc.policy.bundle.activations{result, source, reason}.
func (s *Server) countActivation(source string, err error) {
	if s.activations == nil {
		return
	}
	result, code := "activated", ""
	if err != nil {
		result, code = "refused", string(activateCode(err))
	}
	s.activations.Add(context.Background(), 1, metric.WithAttributes(
		attribute.String("result", result), attribute.String("source", source), attribute.String("reason", code)))
}

// isDir reports whether path is a directory.
func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
