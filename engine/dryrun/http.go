package dryrun

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// Paths of the dry-run endpoints.
const (
	PathSessions = wire.PathDryRunSessions
	pathSession  = PathSessions + "/{id}"
)

// DefaultMaxCandidateBytes bounds an uploaded candidate bundle unless
// Deps.MaxCandidateBytes says otherwise.
const DefaultMaxCandidateBytes = 32 << 20

// Loader reads and compiles an uploaded candidate bundle. The sidecar's
// loader holds candidates to what it holds the bundles it serves: the
// signature policy.bundle_verify_key_file requires, the built-ins
// policy.allow_network_builtins allows. A refusal it returns as a
// *CandidateError is answered with that status and code; any other error
// is 422 policy-error.
type Loader func(candidate []byte) (*policy.Set, error)

// CandidateError is a refused candidate.
type CandidateError struct {
	Status int
	Code   reason.Code
	Msg    string
}

func (e *CandidateError) Error() string { return e.Msg }

// Register adds the dry-run endpoints to mux, each behind guard (the
// sidecar's admin guard); load reads the candidates:
//
//	POST   /v1/dry-run/sessions?duration=5m[&queue_size=N]  body: the candidate bundle (tar.gz)
//	GET    /v1/dry-run/sessions                              every running and recent session
//	GET    /v1/dry-run/sessions/{id}                         one session's report so far
//	DELETE /v1/dry-run/sessions/{id}                         stop it; its final report
func (m *Manager) Register(mux *http.ServeMux, guard func(http.HandlerFunc) http.HandlerFunc, load Loader) {
	mux.HandleFunc("POST "+PathSessions, guard(func(w http.ResponseWriter, r *http.Request) { m.serveStart(w, r, load) }))
	mux.HandleFunc("GET "+PathSessions, guard(m.serveList))
	mux.HandleFunc("GET "+pathSession, guard(m.serveGet))
	mux.HandleFunc("DELETE "+pathSession, guard(m.serveStop))
}

func (m *Manager) serveStart(w http.ResponseWriter, r *http.Request, load Loader) {
	var opts Options
	q := r.URL.Query()
	d, err := time.ParseDuration(q.Get("duration"))
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, wire.Indented, string(reason.InputInvalid), fmt.Sprintf("duration: want a duration such as 5m, got %q", q.Get("duration")))
		return
	}
	opts.Duration = d
	if v := q.Get("queue_size"); v != "" {
		if opts.QueueSize, err = strconv.Atoi(v); err != nil {
			wire.WriteError(w, http.StatusBadRequest, wire.Indented, string(reason.InputInvalid), fmt.Sprintf("queue_size: want an integer, got %q", v))
			return
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, m.deps.MaxCandidateBytes))
	if err != nil {
		wire.WriteError(w, http.StatusRequestEntityTooLarge, wire.Indented, string(reason.BundleTooLarge), fmt.Sprintf("candidate bundle larger than %d bytes (policy.bundle_max_bytes)", m.deps.MaxCandidateBytes))
		return
	}
	if len(body) == 0 {
		wire.WriteError(w, http.StatusBadRequest, wire.Indented, string(reason.InputInvalid), "the body must be the candidate policy bundle (tar.gz)")
		return
	}
	set, err := load(body)
	if ce := (*CandidateError)(nil); errors.As(err, &ce) {
		wire.WriteError(w, ce.Status, wire.Indented, string(ce.Code), ce.Msg)
		return
	}
	if err != nil {
		wire.WriteError(w, http.StatusUnprocessableEntity, wire.Indented, string(reason.PolicyError), "candidate rejected: "+err.Error())
		return
	}
	s, err := m.Start(set, opts)
	switch {
	case errors.Is(err, ErrOptions):
		wire.WriteError(w, http.StatusBadRequest, wire.Indented, string(reason.InputInvalid), err.Error())
		return
	case errors.Is(err, ErrTooMany):
		wire.WriteError(w, http.StatusConflict, wire.Indented, string(reason.TooManySessions), err.Error())
		return
	case err != nil:
		wire.WriteError(w, http.StatusServiceUnavailable, wire.Indented, string(reason.Unavailable), err.Error())
		return
	}
	w.Header().Set("Location", PathSessions+"/"+s.ID())
	wire.WriteJSON(w, http.StatusCreated, wire.Indented, s.Report())
}

func (m *Manager) serveList(w http.ResponseWriter, _ *http.Request) {
	list := m.List()
	out := make([]Report, len(list))
	for i, s := range list {
		out[i] = s.Report()
	}
	wire.WriteJSON(w, http.StatusOK, wire.Indented, map[string]any{"sessions": out})
}

func (m *Manager) serveGet(w http.ResponseWriter, r *http.Request) {
	s, ok := m.Get(r.PathValue("id"))
	if !ok {
		wire.WriteError(w, http.StatusNotFound, wire.Indented, string(reason.SessionNotFound), fmt.Sprintf("no dry-run session %q", r.PathValue("id")))
		return
	}
	wire.WriteJSON(w, http.StatusOK, wire.Indented, s.Report())
}

func (m *Manager) serveStop(w http.ResponseWriter, r *http.Request) {
	s, ok := m.Stop(r.PathValue("id"))
	if !ok {
		wire.WriteError(w, http.StatusNotFound, wire.Indented, string(reason.SessionNotFound), fmt.Sprintf("no dry-run session %q", r.PathValue("id")))
		return
	}
	<-s.Done()
	wire.WriteJSON(w, http.StatusOK, wire.Indented, s.Report())
}
