package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// adminTokenEnv writes token to a file and points SVC_ADMIN_TOKEN_FILE
// at it for the test.
func adminTokenEnv(t *testing.T, token string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "admin-token")
	testkit.WriteFile(t, f, []byte(token+"\n"))
	t.Setenv(envAdminTokenFile, f)
}

// farStatusServer answers a healthy status on a port of ip, counting in
// hits the requests and in leaked (when not nil) those that carried token;
// it returns the server's host:port, or "" when ip cannot be listened on.
func farStatusServer(t *testing.T, ip, token string, hits, leaked *atomic.Int32) string {
	t.Helper()
	srv := testkit.ServeOn(t, ip, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if leaked != nil && strings.Contains(r.Header.Get("Authorization"), token) {
			leaked.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"healthy","ready":true}`))
	}))
	if srv == nil {
		return ""
	}
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestAdminTokenNotSentInTheClear: with an admin token, core refuses
// plain http to a host that is not loopback before it connects (exit 4,
// naming the variable and the way out), and the server never sees the
// token.
func TestAdminTokenNotSentInTheClear(t *testing.T) {
	const token = "admin-token-51aa"
	adminTokenEnv(t, token)
	target := "http://192.0.2.1:7700" // TEST-NET-1: never answers
	var hits, leaked atomic.Int32
	if ip := testkit.NonLoopbackIPv4(); ip != "" {
		if addr := farStatusServer(t, ip, token, &hits, &leaked); addr != "" {
			target = "http://" + addr
		}
	}
	r := run(t, "", "--sidecar", target, "sidecar", "status")
	if r.code != exitInsecureToken {
		t.Errorf("exit %d, want %d\n%s%s", r.code, exitInsecureToken, r.stdout, r.stderr)
	}
	for _, want := range []string{"refusing to send the admin token", envAdminTokenFile, "https", "--sidecar"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Error("the output shows the admin token")
	}
	if n := leaked.Load(); n > 0 {
		t.Errorf("the admin token crossed plain http %d times", n)
	}
	if n := hits.Load(); n > 0 {
		t.Errorf("core sent %d requests to a plain-http host off loopback", n)
	}
}

// TestAdminTokenOverLoopbackHTTP: plain http on loopback carries the
// token as before.
func TestAdminTokenOverLoopbackHTTP(t *testing.T) {
	const token = "admin-token-0b3f"
	adminTokenEnv(t, token)
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"healthy","ready":true}`))
	}))
	t.Cleanup(srv.Close)
	for _, base := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		r := run(t, "", "--sidecar", base, "sidecar", "status")
		if r.code != 0 {
			t.Errorf("%s: exit %d\n%s%s", base, r.code, r.stdout, r.stderr)
		}
		if a, _ := got.Load().(string); a != "Bearer "+token {
			t.Errorf("%s: Authorization = %q, want the admin token", base, a)
		}
	}
}

// TestAdminTokenURLRule: the rule is engine/loopback's: https anywhere,
// http only to a loopback host; without a token any URL goes.
func TestAdminTokenURLRule(t *testing.T) {
	a := &app{}
	adminTokenEnv(t, "admin-token-77c2")
	for raw, ok := range map[string]bool{
		"https://sidecar.internal:7700": true,
		"https://10.0.0.5:7700":         true,
		"http://localhost:7700":         true,
		"http://LOCALHOST:7700":         true,
		"http://127.0.0.2:7700":         true,
		"http://[::1]:7700":             true,
		"http://sidecar.internal:7700":  false,
		"http://10.0.0.5:7700":          false,
		"http://localhost.evil.example": false,
	} {
		_, err := a.sidecarClientAt(raw, "--sidecar")
		if (err == nil) != ok {
			t.Errorf("%s with a token: err = %v, want allowed %v", raw, err, ok)
		}
	}
	t.Setenv(envAdminTokenFile, "")
	if _, err := a.sidecarClientAt("http://10.0.0.5:7700", "--sidecar"); err != nil {
		t.Errorf("plain http off loopback without a token: %v", err)
	}
}

// TestAdminTokenNotSentOnInsecureRedirect: a loopback sidecar URL that
// redirects to plain http off loopback is not followed with the token.
func TestAdminTokenNotSentOnInsecureRedirect(t *testing.T) {
	const token = "admin-token-9d0c"
	adminTokenEnv(t, token)
	ip := testkit.NonLoopbackIPv4()
	if ip == "" {
		ip = "192.0.2.1" // TEST-NET-1: the refusal comes before any dial
	}
	var hits atomic.Int32
	if addr := farStatusServer(t, ip, token, &hits, nil); addr != "" {
		ip = addr
	} else {
		ip += ":7700"
	}
	near := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+ip+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(near.Close)
	r := run(t, "", "--sidecar", near.URL, "sidecar", "status")
	if r.code != exitInsecureToken || !strings.Contains(r.stderr, "refusing to follow the redirect") {
		t.Errorf("exit %d, want %d refusing the redirect\n%s%s", r.code, exitInsecureToken, r.stdout, r.stderr)
	}
	if n := hits.Load(); n > 0 {
		t.Errorf("core followed the redirect to plain http off loopback %d times", n)
	}
	if strings.Contains(r.stdout+r.stderr, token) {
		t.Error("the output shows the admin token")
	}
}
