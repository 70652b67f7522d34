package sidecar

import (
	"bufio"
	"net/http"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// TestRestartEndpoint: POST /v1/restart hands the request to the restart
// hook, which ends Serve; without a hook it is refused.
func TestRestartEndpoint(t *testing.T) {
	t.Run("no hook", func(t *testing.T) {
		r := startSidecar(t, devConfig())
		code, body := post(t, r, PathRestart, nil)
		if code != http.StatusNotImplemented || errorCode(body) != string(reason.RestartUnsupported) {
			t.Errorf("POST %s = %d %s, want 501 %s", PathRestart, code, body, reason.RestartUnsupported)
		}
	})
	tests := []struct {
		name     string
		body     string
		wantCode int
		want     RestartRequest
	}{
		{"defaults", "", http.StatusAccepted, RestartRequest{DrainTimeout: 30 * time.Second}},
		{"drain and force", `{"drain_timeout_seconds": 1.5, "force": true}`, http.StatusAccepted, RestartRequest{DrainTimeout: 1500 * time.Millisecond, Force: true}},
		{"negative drain", `{"drain_timeout_seconds": -1}`, http.StatusBadRequest, RestartRequest{}},
		{"drain above the bound", `{"drain_timeout_seconds": 601}`, http.StatusBadRequest, RestartRequest{}},
		// Beyond what a time.Duration holds: refused, not wrapped to a
		// negative timeout that skips the drain.
		{"drain beyond a duration", `{"drain_timeout_seconds": 1e20}`, http.StatusBadRequest, RestartRequest{}},
		{"unknown field", `{"drain": 1}`, http.StatusBadRequest, RestartRequest{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan RestartRequest, 1)
			r := startServer(t, Deps{Engine: newTestEngine(t, devConfig()), Restart: func(req RestartRequest) error {
				got <- req
				return nil
			}})
			testkit.Eventually(t, "ready", r.isReady)
			code, body := post(t, r, PathRestart, []byte(tc.body))
			if code != tc.wantCode {
				t.Fatalf("POST %s %s = %d %s, want %d", PathRestart, tc.body, code, body, tc.wantCode)
			}
			if code != http.StatusAccepted {
				return
			}
			select {
			case req := <-got:
				if req != tc.want {
					t.Errorf("restart request %+v, want %+v", req, tc.want)
				}
			case <-time.After(waitTimeout):
				t.Fatal("the restart hook was not called")
			}
			select {
			case err := <-r.done:
				r.done <- err
			case <-time.After(waitTimeout):
				t.Fatal("Serve did not return after the restart")
			}
		})
	}
}

// TestRestartForceSkipsDrain: a restart with force does not wait for
// in-flight requests, even under a long drain timeout; they are cut and
// Serve returns at once. (Without force, TestDrain shows them finish.)
func TestRestartForceSkipsDrain(t *testing.T) {
	idp := newTestIdP(t)
	r := startServer(t, Deps{Engine: newTestEngine(t, testConfig(idp)), Restart: func(RestartRequest) error { return nil }})
	testkit.Eventually(t, "ready", r.isReady)
	c, _ := inFlight(t, r, idp)

	began := time.Now()
	if code, answer := post(t, r, PathRestart, []byte(`{"drain_timeout_seconds": 600, "force": true}`)); code != http.StatusAccepted {
		t.Fatalf("POST %s = %d %s", PathRestart, code, answer)
	}
	select {
	case err := <-r.done:
		r.done <- err
	case <-time.After(waitTimeout):
		t.Fatalf("Serve did not return within %s of a forced restart with a 600 s drain timeout", waitTimeout)
	}
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		resp.Body.Close()
		t.Errorf("the in-flight request got an answer (%d) from a forced restart, want it cut", resp.StatusCode)
	}
	t.Logf("forced restart returned after %s", time.Since(began))
}
