// Package harness runs the real svc binaries and their peers as processes
// for the end-to-end tests: it builds the binaries once per test run,
// hands out loopback ports, starts and stops the sidecar, an OpenID
// provider, nginx, Caddy and a headless Chromium, and serves the in-test
// peers (a JWKS endpoint with its own signing keys, an echoing upstream,
// an OTLP receiver).
//
// Every helper takes the test's testing.TB, registers its own cleanup and
// fails the test with the process's output when something does not start.
// A test needing an external program that is not installed is skipped,
// except under CI (CI=true, testkit.InCI), where it fails: a
// missing peer must never turn into a green run.
package harness

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// InCI reports whether the tests run under CI (testkit.InCI), where a
// missing peer is a failure rather than a reason to skip.
func InCI() bool { return testkit.InCI() }

// Missing skips the test, or fails it under CI, because something it needs
// is not installed (testkit.Missing). install says how to install it.
func Missing(t testing.TB, what, install string) {
	t.Helper()
	testkit.Missing(t, what, install)
}

// LookPath returns the path of an external program, skipping the test (or
// failing it under CI) with the Debian package pkg named when it is not
// installed (testkit.LookPath).
func LookPath(t testing.TB, name, pkg string, also ...string) string {
	t.Helper()
	return testkit.LookPath(t, name, pkg, also...)
}

var (
	rootOnce sync.Once
	rootDir  string
	rootErr  error
)

// ModuleRoot returns the directory holding the repository's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() {
		dir, err := os.Getwd()
		if err != nil {
			rootErr = err
			return
		}
		for {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				rootDir = dir
				return
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				rootErr = errors.New("no go.mod above the working directory")
				return
			}
			dir = parent
		}
	})
	if rootErr != nil {
		t.Fatalf("module root: %v", rootErr)
	}
	return rootDir
}

var (
	portsMu sync.Mutex
	given   = map[int]bool{}
)

// FreeAddr returns a "127.0.0.1:port" address that nothing listens on: a
// random port below the ephemeral range that a listener could take and
// closed again. Ports handed out before by this process are never handed
// out again, so parallel tests cannot collide among themselves.
func FreeAddr(t testing.TB) string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 500 {
		port := freePortLow + rand.IntN(freePortHigh-freePortLow)
		if given[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue // in use
		}
		_ = l.Close()
		given[port] = true
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	t.Fatal("free port: no unused port found")
	return ""
}

// FreeAddr's ports lie below the kernel's ephemeral range (32768-60999 by
// default on Linux), from which outgoing connections and every ":0"
// listener take theirs: a port handed out here, which a child process
// binds a while later, cannot be taken in between by a connection of this
// or another test package, as one from ":0" could.
const (
	freePortLow  = 20000
	freePortHigh = 32768
)

// WriteFile writes content to name inside dir and returns its path.
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	return p
}

// baseEnv is the environment of a child process: the test's own, less
// every variable that would change what the child does (SVC_*, OTEL_*,
// proxies, the state directories a sidecar records bundles in), so that
// only what a test sets explicitly applies.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "SVC_"), strings.HasPrefix(name, "OTEL_"),
			name == "HTTP_PROXY", name == "HTTPS_PROXY", name == "http_proxy",
			name == "https_proxy", name == "ALL_PROXY", name == "all_proxy",
			name == "STATE_DIRECTORY", name == "XDG_STATE_HOME":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// envList turns a map into KEY=value pairs appended to base.
func envList(base []string, extra map[string]string) []string {
	env := append([]string(nil), base...)
	for k, v := range extra {
		env = append(env, fmt.Sprintf("%s=%s", k, v))
	}
	return env
}

// ChildEnv is the environment of a program a test runs that is not the
// sidecar (a shell block of the docs, a package manager): the test's own
// less SVC_*, OTEL_* and proxy variables (baseEnv), plus extra.
func ChildEnv(extra map[string]string) []string { return envList(baseEnv(), extra) }

// readFileIfExists returns the file's content, or nothing when it does not
// exist (yet).
func readFileIfExists(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// readAll reads a response body of at most 8 MiB.
func readAll(resp *http.Response) ([]byte, error) {
	return io.ReadAll(io.LimitReader(resp.Body, 8<<20))
}
