package sidecar

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// devConfig is a development-mode configuration on free ports, where an
// unsigned bundle may be activated: the guards, not the signature, decide.
func devConfig() config.Config {
	var dev config.Config
	dev.SDK.SidecarAddr, dev.Sidecar.HTTPAddr, dev.SDK.TenantID = "127.0.0.1:0", "127.0.0.1:0", testTenant
	dev.Audit.Destination = config.AuditOff
	return dev
}

// TestCrossSiteRefusedBeforeBody sends what a web page in a browser on
// the sidecar's host can send: each refusal is a 403 with its code that
// arrives while the body is still unsent, so the body was never read;
// the policy stays.
func TestCrossSiteRefusedBeforeBody(t *testing.T) {
	restricted := t.TempDir()
	writePolicy(t, restricted, true)
	unsigned := buildBundle(t, restricted, "rev-from-a-page", nil)
	r := startSidecar(t, devConfig())
	initial := getStatus(t, r).PolicyRevision
	base := "http://" + r.HTTPAddr().String()

	tests := []struct {
		name     string
		path     string
		header   map[string]string
		host     string
		wantCode string
	}{
		{"foreign Origin", PathReloadPolicy, map[string]string{"Origin": "https://evil.example"}, "", string(reason.CrossSiteRequest)},
		{"null Origin", PathReloadPolicy, map[string]string{"Origin": "null"}, "", string(reason.CrossSiteRequest)},
		{"Origin of another local port", PathReloadPolicy, map[string]string{"Origin": "http://localhost:3000"}, "", string(reason.CrossSiteRequest)},
		{"Sec-Fetch-Site cross-site", PathReloadPolicy, map[string]string{"Sec-Fetch-Site": "cross-site"}, "", string(reason.CrossSiteRequest)},
		{"DNS rebinding Host", PathReloadPolicy, nil, "rebind.evil.example:" + portOf(r), string(reason.HostNotAllowed)},
		{"DNS rebinding Host reading the config", PathConfig, nil, "rebind.evil.example", string(reason.HostNotAllowed)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			method := http.MethodPost
			var body io.Reader = pr
			if tc.path == PathConfig {
				method, body = http.MethodGet, nil
			}
			req, err := http.NewRequest(method, base+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if body != nil {
				req.ContentLength = int64(len(unsigned))
			}
			type answer struct {
				resp *http.Response
				err  error
			}
			got := make(chan answer, 1)
			go func() {
				resp, err := httpClient.Do(req)
				got <- answer{resp, err}
			}()
			var a answer
			select {
			case a = <-got:
			case <-time.After(waitTimeout):
				t.Fatal("no answer while the body was held back: the server waits for the body")
			}
			if a.err != nil {
				t.Fatal(a.err)
			}
			defer a.resp.Body.Close()
			b, _ := io.ReadAll(a.resp.Body)
			if a.resp.StatusCode != http.StatusForbidden || errorCode(b) != tc.wantCode {
				t.Errorf("%s = %d %s, want 403 %s", tc.path, a.resp.StatusCode, b, tc.wantCode)
			}
			if rev := getStatus(t, r).PolicyRevision; rev != initial {
				t.Errorf("policy_revision = %q, want %q kept", rev, initial)
			}
		})
	}

	// The same upload from a command-line client, and from a browser on
	// the sidecar's own origin, goes through.
	for _, origin := range []string{"", base} {
		req, _ := http.NewRequest(http.MethodPost, base+PathReloadPolicy, bytes.NewReader(unsigned))
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("upload with Origin %q = %d %s, want 200", origin, resp.StatusCode, b)
		}
	}
}

func portOf(r *running) string {
	a := r.HTTPAddr().String()
	return a[strings.LastIndex(a, ":")+1:]
}

// TestConfigRedactsURLs: a credential carried in a URL's query does not
// leave the sidecar through GET /v1/config.
func TestConfigRedactsURLs(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	const secret = "k3y-in-query-91d2"
	cfg.SDK.JWKSURL = idp.JWKSURL() + "?api_key=" + secret
	r := startSidecar(t, cfg)
	code, body := get(t, r, PathConfig)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", PathConfig, code, body)
	}
	if strings.Contains(string(body), secret) {
		t.Errorf("the live configuration shows the query credential:\n%s", body)
	}
	if !strings.Contains(string(body), "api_key="+config.RedactedMark) {
		t.Errorf("the live configuration does not show the redacted key:\n%s", body)
	}
}

// TestDirectoryReloadRefusedWithVerifyKey: with a verification key the
// signed bundle stays active; an empty POST cannot swap in the unsigned
// directory or the embedded default.
func TestDirectoryReloadRefusedWithVerifyKey(t *testing.T) {
	idp := newTestIdP(t)
	signKey, verifyKey := testkit.ECKeyPEM(t)
	restricted := t.TempDir()
	writePolicy(t, restricted, true)
	cfg := verifyingConfig(t, idp, verifyKey)
	r := startSidecar(t, cfg)
	if code, body := post(t, r, PathReloadPolicy, buildBundle(t, restricted, "rev-signed", signKey)); code != http.StatusOK {
		t.Fatalf("signed bundle: %d %s", code, body)
	}
	code, body := post(t, r, PathReloadPolicy, nil)
	if code != http.StatusConflict || errorCode(body) != string(reason.SignedBundleRequired) {
		t.Errorf("empty reload = %d %s, want 409 %s", code, body, reason.SignedBundleRequired)
	}
	if st := getStatus(t, r); st.PolicyRevision != "rev-signed" {
		t.Errorf("policy_revision = %q, want the signed bundle's rev-signed", st.PolicyRevision)
	}
	viewer := idp.token(t, "alice", testTenant, "viewer")
	if allowed(t, dial(t, r.GRPCAddr()), viewer, "/orders/42") {
		t.Error("the restricted signed policy no longer decides")
	}
}

// TestAdminRequireToken: with sidecar.admin_require_token, loopback and
// Unix socket callers of the admin endpoints need the token like remote
// ones; the read endpoints still serve loopback callers (the SDKs call
// them without an admin token).
func TestAdminRequireToken(t *testing.T) {
	const token = "admin-token-7c41"
	cfg := devConfig()
	cfg.Sidecar.AdminTokenFile = testkit.TempFile(t, "admin-token", []byte(token+"\n"))
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
	cfg.Sidecar.AdminTokenFile = testkit.TempFile(t, "admin-token", []byte(token+"\n"))
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
