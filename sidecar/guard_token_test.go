package sidecar

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// writeAdminToken writes token to a file of its own and returns its path.
func writeAdminToken(t *testing.T, token string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(f, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAdminRequireToken: with sidecar.admin_require_token, loopback and
// Unix socket callers of the admin endpoints need the token like remote
// ones; the read endpoints still serve loopback callers (the SDKs call
// them without an admin token).
func TestAdminRequireToken(t *testing.T) {
	const token = "admin-token-7c41"
	cfg := devConfig()
	cfg.Sidecar.AdminTokenFile = writeAdminToken(t, token)
	cfg.Sidecar.AdminRequireToken = true
	s, err := New(Deps{Engine: newTestEngine(t, cfg), Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.closeListeners)
	h := s.http.Handler

	tests := []struct {
		name     string
		method   string
		path     string
		remote   string
		auth     string
		wantCode int
	}{
		{"loopback v4 without token", http.MethodPost, PathReloadPolicy, "127.0.0.1:5555", "", http.StatusForbidden},
		{"loopback v6 without token", http.MethodPost, PathReloadPolicy, "[::1]:5555", "", http.StatusForbidden},
		{"unix socket without token", http.MethodPost, PathReloadPolicy, "@", "", http.StatusForbidden},
		{"unix socket, empty peer, without token", http.MethodPost, PathReloadPolicy, "", "", http.StatusForbidden},
		{"loopback with wrong token", http.MethodPost, PathReloadPolicy, "127.0.0.1:5555", "Bearer " + token + "x", http.StatusForbidden},
		{"loopback restart without token", http.MethodPost, PathRestart, "127.0.0.1:5555", "", http.StatusForbidden},
		{"loopback with token", http.MethodPost, PathReloadPolicy, "127.0.0.1:5555", "Bearer " + token, http.StatusOK},
		{"unix socket with token", http.MethodPost, PathReloadPolicy, "@", "Bearer " + token, http.StatusOK},
		{"remote with token", http.MethodPost, PathReloadPolicy, "10.1.2.3:5555", "Bearer " + token, http.StatusOK},
		{"loopback reads status without token", http.MethodGet, PathStatus, "127.0.0.1:5555", "", http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := serveFrom(h, tc.method, tc.path, tc.remote, tc.auth)
			if rec.Code != tc.wantCode {
				t.Fatalf("%s %s from %q = %d %s, want %d", tc.method, tc.path, tc.remote, rec.Code, rec.Body, tc.wantCode)
			}
			if rec.Code == http.StatusForbidden && errorCode(rec.Body.Bytes()) != string(reason.AdminTokenRequired) {
				t.Errorf("refusal code = %s, want %s", rec.Body, reason.AdminTokenRequired)
			}
			if strings.Contains(rec.Body.String(), token) {
				t.Error("the answer shows the admin token")
			}
		})
	}
}

// TestAdminRequireTokenOverUnixSocket asks for a reload over a real Unix
// socket: refused without the token, done with it.
func TestAdminRequireTokenOverUnixSocket(t *testing.T) {
	const token = "admin-token-d09e"
	sock := filepath.Join(t.TempDir(), "http.sock")
	cfg := devConfig()
	cfg.Sidecar.HTTPAddr = "unix://" + sock
	cfg.Sidecar.AdminTokenFile = writeAdminToken(t, token)
	cfg.Sidecar.AdminRequireToken = true
	startServer(t, Deps{Engine: newTestEngine(t, cfg)})
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	reload := func(auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://localhost"+PathReloadPolicy, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	testkit.Eventually(t, "the socket answers", func() bool { code, _ := reload(""); return code != 0 })
	if code, body := reload(""); code != http.StatusForbidden || errorCode([]byte(body)) != string(reason.AdminTokenRequired) {
		t.Errorf("reload over the socket without token = %d %s, want 403 %s", code, body, reason.AdminTokenRequired)
	}
	if code, body := reload("Bearer " + token); code != http.StatusOK {
		t.Errorf("reload over the socket with token = %d %s, want 200", code, body)
	}
}

// serveFrom has h answer method path on the local listener 127.0.0.1:7700
// as if from the peer remote, with auth as its Authorization header when
// it is not empty.
func serveFrom(h http.Handler, method, path, remote, auth string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	req.Host = "127.0.0.1:7700"
	req.RemoteAddr = remote
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
