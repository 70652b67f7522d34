package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// restartingSidecar answers /v1/status and /v1/restart as a sidecar whose
// new image is ready at once and degraded for its first degradedPolls
// status answers (-1: for ever), as one is until its first fetch of the
// IdP metadata has answered.
func restartingSidecar(t *testing.T, degradedPolls int64) string {
	t.Helper()
	before := time.Now().Add(-time.Hour).UTC()
	var restarted atomic.Bool
	var polls atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/restart", func(w http.ResponseWriter, _ *http.Request) {
		restarted.Store(true)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"restarting":true}`))
	})
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		st := map[string]any{"status": "healthy", "ready": true, "version": "0.1.0", "pid": 7,
			"started_at": before, "policy_revision": "r1"}
		if restarted.Load() {
			st["started_at"] = before.Add(time.Hour)
			if n := polls.Add(1); degradedPolls < 0 || n <= degradedPolls {
				st["status"], st["reason"] = "degraded", "saml-idp-unavailable"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestRestartWaitsForHealthy: a new image that is degraded for a moment
// after it became ready (its IdP metadata not fetched yet) is reported
// healthy, exit 0, once it is; one that stays degraded is reported as
// degraded with exit 1 after the settle time.
func TestRestartWaitsForHealthy(t *testing.T) {
	t.Run("degraded for a moment", func(t *testing.T) {
		url := restartingSidecar(t, 3)
		r := run(t, "", "--sidecar", url, "sidecar", "restart", "--drain-timeout", "1")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "healthy ") {
			t.Errorf("exit %d, stdout %q, stderr %q; want healthy, exit 0", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("stays degraded", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits out the settle time")
		}
		url := restartingSidecar(t, -1)
		start := time.Now()
		r := run(t, "", "--sidecar", url, "sidecar", "restart", "--drain-timeout", "1")
		if r.code != exitFailed || !strings.HasPrefix(r.stdout, "degraded ") {
			t.Errorf("exit %d, stdout %q, stderr %q; want degraded, exit 1", r.code, r.stdout, r.stderr)
		}
		if took := time.Since(start); took < restartSettle {
			t.Errorf("reported after %v, before the settle time %v", took, restartSettle)
		}
	})
}
