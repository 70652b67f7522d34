package sidecar

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/wire"
)

// PathRestart asks the sidecar to restart itself.
const PathRestart = wire.PathRestart

// maxDrainTimeout bounds the drain timeout a restart may ask for.
const maxDrainTimeout = 10 * time.Minute

// RestartRequest says how to stop serving before the next image starts.
type RestartRequest struct {
	// DrainTimeout bounds the wait for in-flight requests.
	DrainTimeout time.Duration
	// Force stops at once, failing in-flight requests.
	Force bool
}

// stopServing ends Serve as its context ending would.
func (s *Server) stopServing() {
	if f := s.stop.Load(); f != nil {
		(*f)()
	}
}

// restartBody is the JSON body of POST /v1/restart; every field is
// optional.
type restartBody struct {
	// DrainTimeoutSeconds defaults to sidecar.drain_timeout.
	DrainTimeoutSeconds *float64 `json:"drain_timeout_seconds"`
	Force               bool     `json:"force"`
}

// Restart drains as req says and ends Serve, after Deps.Restart
// prepared the next image of the process.
func (s *Server) Restart(req RestartRequest) error {
	if err := s.prepareRestart(req); err != nil {
		return err
	}
	s.stopServing()
	return nil
}

func (s *Server) prepareRestart(req RestartRequest) error {
	if s.deps.Restart == nil {
		return errors.New("this sidecar cannot restart itself")
	}
	if !s.restart.CompareAndSwap(nil, &req) {
		return errors.New("a restart is already under way")
	}
	if err := s.deps.Restart(req); err != nil {
		s.restart.Store(nil)
		return err
	}
	s.log.Info("restart asked for", "drain_timeout", req.DrainTimeout.String(), "force", req.Force)
	return nil
}

func (s *Server) serveRestart(w http.ResponseWriter, r *http.Request) {
	var body restartBody
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		wire.WriteError(w, http.StatusBadRequest, wire.Indented, string(reason.InputInvalid), "restart body: "+err.Error())
		return
	}
	// Read the body to its end: a forced stop closes this connection,
	// and unread request bytes would make that close a reset that can
	// lose the answer.
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 4<<10))
	req := RestartRequest{DrainTimeout: s.deps.Engine.Config().Sidecar.DrainTimeout.Duration, Force: body.Force}
	if d := body.DrainTimeoutSeconds; d != nil {
		// Compared as seconds: a value beyond what a Duration holds must
		// not wrap to a negative timeout on conversion.
		if !(*d >= 0 && *d <= maxDrainTimeout.Seconds()) {
			wire.WriteError(w, http.StatusBadRequest, wire.Indented, string(reason.InputInvalid), fmt.Sprintf("drain_timeout_seconds must be from 0 to %.0f", maxDrainTimeout.Seconds()))
			return
		}
		req.DrainTimeout = time.Duration(*d * float64(time.Second))
	}
	if s.deps.Restart == nil {
		wire.WriteError(w, http.StatusNotImplemented, wire.Indented, string(reason.RestartUnsupported), "this sidecar cannot restart itself")
		return
	}
	if err := s.prepareRestart(req); err != nil {
		wire.WriteError(w, http.StatusConflict, wire.Indented, string(reason.Unavailable), err.Error())
		return
	}
	answer, _ := json.MarshalIndent(map[string]any{
		"restarting": true, "drain_timeout_seconds": req.DrainTimeout.Seconds(), "force": req.Force,
		"pid": os.Getpid(), "started_at": s.started,
	}, "", "  ")
	// The answer goes out whole before the drain starts: a forced stop
	// closes every connection at once, this one included. With its length
	// known it is not chunked, so no closing chunk is left to write after
	// the handler returns, which a forced stop could cut off.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)+1))
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write(append(answer, '\n'))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	s.stopServing()
}
