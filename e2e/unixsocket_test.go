package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// curlUnix runs curl --unix-socket and returns the status code and body.
func curlUnix(t *testing.T, sock, method, path string) (int, string) {
	t.Helper()
	out, err := exec.Command("curl", "-s", "--max-time", "5", "--unix-socket", sock, "-X", method,
		"-w", "\n%{http_code}", "http://localhost"+path).Output()
	if err != nil {
		return 0, err.Error()
	}
	s := string(out)
	i := strings.LastIndex(s, "\n")
	code := 0
	for _, c := range s[i+1:] {
		code = code*10 + int(c-'0')
	}
	return code, s[:i]
}

// TestUnixSocketListeners runs the sidecar on Unix domain sockets for
// gRPC and HTTP: curl --unix-socket reads status, grpc-go checks over the
// socket, and nginx (auth_request) and Caddy (forward_auth) ask the
// sidecar through the socket. A restart keeps the socket file in place.
func TestUnixSocketListeners(t *testing.T) {
	harness.LookPath(t, "curl", "curl")
	k := newKeyring(t)
	dir, err := os.MkdirTemp("", "svc-sock-") // short: socket paths are limited to 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	grpcSock, httpSock := filepath.Join(dir, "grpc.sock"), filepath.Join(dir, "http.sock")
	s := harness.LaunchSidecar(t, harness.SidecarOptions{Config: sidecarConfig, Env: map[string]string{
		"SVC_JWKS_URL":     k.jwks.URL,
		"SVC_SIDECAR_ADDR": "unix://" + grpcSock,
		"SVC_HTTP_ADDR":    "unix://" + httpSock,
		"SVC_SOCKET_MODE":  "0666",
	}})
	t.Cleanup(func() { s.Stop(t) }) // fails the test unless the exit code is 0
	testkit.Eventually(t, "ready over the socket", func() bool { code, _ := curlUnix(t, httpSock, "GET", "/readyz"); return code == 200 })
	st, err := os.Stat(httpSock)
	if err != nil || st.Mode().Perm() != 0o666 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("%s: mode %v (%v), want a socket with mode 0666", httpSock, st.Mode(), err)
	}
	code, body := curlUnix(t, httpSock, "GET", "/v1/status")
	var status struct {
		Status    string    `json:"status"`
		StartedAt time.Time `json:"started_at"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &status) != nil || status.Status != "healthy" {
		t.Fatalf("curl --unix-socket /v1/status = %d %s", code, body)
	}

	conn, err := grpc.NewClient("unix://"+grpcSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	viewer := k.token(t, "alice", "acme", "viewer")
	if r, err := doCheck(conn, "GET", "/orders/1", map[string]string{"authorization": "Bearer " + viewer}, nil); err != nil || r.status != http.StatusOK {
		t.Errorf("Check over the socket: %v %+v", err, r)
	}

	up := harness.StartUpstream(t)
	for _, px := range []struct {
		name  string
		start func() *harness.Proxy
	}{
		{"nginx auth_request", func() *harness.Proxy { return harness.StartNginx(t, "unix:"+httpSock+":", up.Addr) }},
		{"caddy forward_auth", func() *harness.Proxy { return harness.StartCaddy(t, "unix/"+httpSock, up.Addr) }},
	} {
		t.Run(px.name, func(t *testing.T) {
			p := px.start()
			for _, tc := range []struct {
				token string
				want  int
			}{{viewer, http.StatusOK}, {"", http.StatusUnauthorized}, {k.token(t, "mallory", "globex", "admin"), http.StatusForbidden}} {
				req, _ := http.NewRequest("GET", p.URL+"/orders/42", nil)
				if tc.token != "" {
					req.Header.Set("Authorization", "Bearer "+tc.token)
				}
				if status, h, b := harness.Do(t, req); status != tc.want {
					t.Errorf("through %s: %s, want %d", px.name, harness.Describe(status, h, b), tc.want)
				}
			}
		})
	}

	// A restart hands the socket over: the file stays, and answers.
	if code, body := curlUnix(t, httpSock, "POST", "/v1/restart"); code != http.StatusAccepted {
		t.Fatalf("POST /v1/restart = %d %s", code, body)
	}
	testkit.Eventually(t, "the new image", func() bool {
		code, body := curlUnix(t, httpSock, "GET", "/v1/status")
		var st struct {
			StartedAt time.Time `json:"started_at"`
			Ready     bool      `json:"ready"`
		}
		return code == 200 && json.Unmarshal([]byte(body), &st) == nil && st.Ready && st.StartedAt.After(status.StartedAt)
	})
	if r, err := doCheck(conn, "GET", "/orders/1", map[string]string{"authorization": "Bearer " + viewer}, nil); err != nil || r.status != http.StatusOK {
		t.Errorf("Check over the socket after the restart: %v %+v", err, r)
	}
}
