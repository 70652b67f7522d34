package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ReadyTimeout bounds how long a sidecar may take to report ready.
const ReadyTimeout = 30 * time.Second

// DefaultTenant is the deployment tenant the harness gives a sidecar
// unless the test sets SVC_TENANT_ID itself.
const DefaultTenant = "acme"

// SidecarOptions configures one svc-sidecar process.
type SidecarOptions struct {
	// Config is the body of svc.toml, written to the sidecar's working
	// directory, where the sidecar looks by default. Empty writes no file.
	Config string
	// ConfigFlag writes the configuration to another file name and passes
	// it with --config instead.
	ConfigFlag bool
	// Env is set on top of the harness defaults (loopback listen
	// addresses, tenant DefaultTenant, audit log and state directory in
	// the working directory, log level debug). An empty value removes a
	// default.
	Env map[string]string
	// Args are extra command-line arguments.
	Args []string
	// Wrapper, when set, is a command that runs svc-sidecar: the binary
	// path and Args are appended to it (for example unshare, to run the
	// sidecar as PID 1 of its own PID namespace).
	Wrapper []string
}

// Sidecar is a svc-sidecar process.
type Sidecar struct {
	*Process
	// GRPCAddr and HTTPAddr are the listen addresses (SVC_SIDECAR_ADDR and
	// SVC_HTTP_ADDR).
	GRPCAddr, HTTPAddr string
	// Dir is the working directory.
	Dir string
	// AuditPath is the audit log file the harness configured, "" when the
	// test chose another destination.
	AuditPath string

	connOnce sync.Once
	conn     *grpc.ClientConn
	connErr  error
	stopOnce sync.Once
}

// StartSidecar starts svc-sidecar and waits until GET /readyz answers 200.
// When the test ends the sidecar is sent SIGTERM and must exit 0.
func StartSidecar(t testing.TB, opts SidecarOptions) *Sidecar {
	t.Helper()
	s := LaunchSidecar(t, opts)
	s.waitReady(t)
	t.Cleanup(func() { s.Stop(t) })
	return s
}

// LaunchSidecar starts svc-sidecar without waiting for it to become ready,
// for tests of start-up failures. The process is stopped when the test
// ends, without any assertion on its exit code.
func LaunchSidecar(t testing.TB, opts SidecarOptions) *Sidecar {
	t.Helper()
	bin := Binary(t, "svc-sidecar")
	dir := t.TempDir()
	s := &Sidecar{Dir: dir}

	env := map[string]string{
		"SVC_SIDECAR_ADDR":      FreeAddr(t),
		"SVC_HTTP_ADDR":         FreeAddr(t),
		"SVC_TENANT_ID":         DefaultTenant,
		"SVC_LOG_LEVEL":         "debug",
		"SVC_AUDIT_DESTINATION": filepath.Join(dir, "audit.log"),
		// A process of its own: a test that starts a second process on
		// the same state passes its directory.
		"SVC_STATE_DIR": filepath.Join(dir, "state"),
		// One development issuer for the whole run, beside the binaries:
		// its key is made once, and the user's own is never touched.
		"SVC_DEV_ISSUER_DIR": DevIssuerDir(t),
	}
	for k, v := range opts.Env {
		if v == "" {
			delete(env, k)
			continue
		}
		env[k] = v
	}
	s.GRPCAddr = env["SVC_SIDECAR_ADDR"]
	s.HTTPAddr = env["SVC_HTTP_ADDR"]
	if env["SVC_AUDIT_DESTINATION"] == filepath.Join(dir, "audit.log") {
		s.AuditPath = env["SVC_AUDIT_DESTINATION"]
	}

	args := append([]string(nil), opts.Args...)
	if opts.Config != "" {
		if opts.ConfigFlag {
			args = append([]string{"--config", WriteFile(t, dir, "sidecar-config.toml", opts.Config)}, args...)
		} else {
			WriteFile(t, dir, "svc.toml", opts.Config)
		}
	}
	argv := append(append(append([]string(nil), opts.Wrapper...), bin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = envList(baseEnv(), env)
	s.Process = StartProcess(t, "svc-sidecar", cmd)
	return s
}

// URL returns the sidecar's local HTTP API URL of path.
func (s *Sidecar) URL(path string) string { return "http://" + s.HTTPAddr + path }

// Stop sends SIGTERM and fails the test unless the sidecar exits 0.
func (s *Sidecar) Stop(t testing.TB) {
	t.Helper()
	s.stopOnce.Do(func() {
		if s.conn != nil {
			_ = s.conn.Close()
		}
		if code := s.Process.Stop(t); code != 0 {
			t.Errorf("svc-sidecar exited with code %d after SIGTERM, want 0", code)
		}
	})
}

// Conn returns a gRPC client connection to the sidecar, closed when the
// sidecar is stopped.
func (s *Sidecar) Conn(t testing.TB) *grpc.ClientConn {
	t.Helper()
	s.connOnce.Do(func() {
		s.conn, s.connErr = grpc.NewClient(s.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	})
	if s.connErr != nil {
		t.Fatalf("grpc client for %s: %v", s.GRPCAddr, s.connErr)
	}
	return s.conn
}

// waitReady polls /readyz until it answers 200, failing the test when the
// process exits first or ReadyTimeout passes. Once ready, the gRPC port
// must accept connections too.
func (s *Sidecar) waitReady(t testing.TB) {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(ReadyTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := "no answer"
	for {
		resp, err := client.Get(s.URL("/readyz"))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc-sidecar not ready after %s: last /readyz: %s", ReadyTimeout, last)
		}
		select {
		case <-s.Done():
			t.Fatalf("svc-sidecar exited with code %d before it was ready", s.ExitCode())
		case <-tick.C:
		}
	}
	c, err := net.DialTimeout("tcp", s.GRPCAddr, time.Second)
	if err != nil {
		t.Fatalf("svc-sidecar reports ready but its gRPC listener %s refuses connections: %v", s.GRPCAddr, err)
	}
	_ = c.Close()
}

// LogRecords parses the sidecar's stderr as JSON lines. A line that is not
// a JSON object fails the test: the sidecar logs JSON only.
func (s *Sidecar) LogRecords(t testing.TB) []map[string]any {
	t.Helper()
	return parseJSONLines(t, "svc-sidecar stderr", s.Stderr.String())
}

// AuditRecords parses the audit log file written so far.
func (s *Sidecar) AuditRecords(t testing.TB) []map[string]any {
	t.Helper()
	if s.AuditPath == "" {
		t.Fatal("the sidecar was started with an audit destination of the test's own")
	}
	// The sidecar gathers audit records for a few milliseconds before it
	// writes them: read until the count has held still for a while, so
	// that the decisions just answered are all in the file.
	recs := ReadJSONLines(t, s.AuditPath)
	for still, deadline := 0, time.Now().Add(5*time.Second); still < 3 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		next := ReadJSONLines(t, s.AuditPath)
		if len(next) == len(recs) {
			still++
		} else {
			still = 0
		}
		recs = next
	}
	return recs
}

// ReadJSONLines parses a file of JSON lines; a missing file is no lines.
func ReadJSONLines(t testing.TB, path string) []map[string]any {
	t.Helper()
	b, err := readFileIfExists(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return parseJSONLines(t, path, string(b))
}

func parseJSONLines(t testing.TB, what, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s line %d is not a JSON object: %q", what, n, clip(line, 300))
		}
		out = append(out, m)
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Get performs GET url and returns the status, headers and body.
func Get(t testing.TB, url string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("request %s: %v", url, err)
	}
	return Do(t, req)
}

// Send sends method url with body ("" for none) and the headers of
// header, leaving out those whose value is empty, and returns the status,
// headers and body.
func Send(t testing.TB, method, url, body string, header map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatalf("request %s %s: %v", method, url, err)
	}
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	return Do(t, req)
}

// Bearer is the Authorization header of token: "Bearer " and the token,
// or "" (no header, to Send) for no token.
func Bearer(token string) string {
	if token == "" {
		return ""
	}
	return "Bearer " + token
}

// Do sends req with a bounded client and returns the status, headers and
// body.
func Do(t testing.TB, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := readAll(resp)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL, err)
	}
	return resp.StatusCode, resp.Header, body
}

// Describe formats a response for failure messages.
func Describe(status int, h http.Header, body []byte) string {
	return fmt.Sprintf("status %d, headers %v, body %s", status, h, clip(string(body), 500))
}
