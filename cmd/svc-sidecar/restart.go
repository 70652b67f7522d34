package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/startcheck"
	"github.com/svc-dev/svc/sidecar"
	"github.com/svc-dev/svc/sidecar/listeners"
)

// handoverReadyTimeout bounds how long a new image keeps connections
// queued while it waits for the JWKS before serving.
const handoverReadyTimeout = 30 * time.Second

// handover is what the next process image inherits: the listening
// sockets, as duplicated descriptors, and their description.
type handover struct {
	files []*os.File
	env   string
	// bundle is the active policy bundle, nil when the policy comes from
	// the configuration.
	bundle *sidecar.CarriedBundle
}

// restarter prepares restarts of this image: it duplicates the listening
// sockets for the next one while the server drains.
type restarter struct {
	set *listeners.Set

	mu   sync.Mutex
	plan *handover
}

func (r *restarter) prepare(sidecar.RestartRequest) error {
	files, env, err := r.set.Handover()
	if err != nil {
		return fmt.Errorf("hand over listeners: %w", err)
	}
	r.mu.Lock()
	r.plan = &handover{files: files, env: env}
	r.mu.Unlock()
	return nil
}

func (r *restarter) next() *handover {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plan
}

// watchHUP handles SIGHUP: the configuration file is read again. An
// invalid one is refused and the running configuration kept. An
// unchanged one reloads the policies in place. A changed one is applied
// by handing over to a new image of the process, which reads it: the
// listening sockets stay open throughout, so no connection is refused.
func (r *restarter) watchHUP(ctx context.Context, hup <-chan os.Signal, path string, running config.Config, srv *sidecar.Server, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		next, err := loadConfig(path)
		if err == nil {
			// What the new image would refuse at start, with the
			// environment it inherits.
			err = startcheck.Env(next, os.Getenv)
		}
		if err == nil {
			err = startcheck.SidecarFiles(next)
		}
		if err != nil {
			log.Error("SIGHUP: configuration refused; the running configuration stays", "err", err)
			continue
		}
		if len(config.Diff(running, next)) == 0 && maps.Equal(running.Overrides, next.Overrides) {
			if err := srv.ReloadPolicies(ctx); err != nil {
				log.Error("SIGHUP: policies not reloaded; the active policies stay", "err", err)
			} else {
				log.Info("SIGHUP: configuration unchanged, policies reloaded", "revision", srv.PolicyRevision())
			}
			continue
		}
		log.Info("SIGHUP: configuration changed; handing over to a new image that reads it")
		if err := srv.Restart(sidecar.RestartRequest{DrainTimeout: running.Sidecar.DrainTimeout.Duration}); err != nil {
			log.Error("SIGHUP: restart refused", "err", err)
		}
	}
}

// waitEngineReady waits until the engine can verify tokens
// (sidecar.KeysReady: development mode, no JWKS to wait for, or its keys
// cached), at most handoverReadyTimeout, and reports whether it can.
func waitEngineReady(ctx context.Context, eng *engine.Engine, log *slog.Logger) bool {
	deadline := time.Now().Add(handoverReadyTimeout)
	for {
		if sidecar.KeysReady(eng) {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			log.Warn("serving before the JWKS is cached", "waited", handoverReadyTimeout.String())
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// execNext replaces this process image with a new one of the same
// executable (the file now at its path, so a restart also upgrades),
// arguments and environment, plus the inherited listeners. The PID stays
// the same, which is what a container's PID 1 or a service manager needs.
func execNext(h *handover) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("restart: find own executable: %w", err)
	}
	exe = strings.TrimSuffix(exe, " (deleted)")
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, listeners.EnvVar+"=") || strings.HasPrefix(kv, envCarried+"=")
	})
	env = append(env, listeners.EnvVar+"="+h.env)
	if h.bundle != nil {
		f, v, err := carryBundle(h.bundle)
		if err != nil {
			// Refuse to restart rather than silently serve another policy.
			for _, f := range h.files {
				f.Close()
			}
			return fmt.Errorf("restart: %w", err)
		}
		h.files = append(h.files, f)
		env = append(env, envCarried+"="+v)
	}
	err = syscall.Exec(exe, os.Args, env)
	// Only reached when exec failed; the descriptors are ours to close.
	for _, f := range h.files {
		f.Close()
	}
	return fmt.Errorf("restart: exec %s: %w", exe, err)
}
