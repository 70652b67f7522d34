// Package redistest runs a throwaway redis-server for tests.
//
// Start looks for the redis-server binary (Debian package redis-server).
// When it is absent the test is skipped, unless CI is true
// (testkit.InCI), where a missing Redis fails the test: continuous
// integration must not silently skip what it is there to run.
package redistest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/internal/testkit"
)

// startTimeout bounds how long a fresh server may take to answer PING.
const startTimeout = 10 * time.Second

// Start runs redis-server on a free loopback port, without persistence, in
// a temporary directory, stops it when tb ends, and returns its address.
func Start(tb testing.TB) string {
	tb.Helper()
	return StartWith(tb, Options{})
}

// Options secure a server as a managed Redis is: a password (of the
// default user, requirepass, or of an ACL user) and TLS.
type Options struct {
	// Password is required of every client; with User, the ACL user's
	// (the default user then takes a random one nobody knows).
	User, Password string
	// TLS, when set, is the server's certificate: the server then takes
	// TLS connections only (no client certificate asked for), and
	// Roots verify it for the readiness check.
	TLS   *testkit.Issued
	Roots *x509.CertPool
}

// StartWith is Start with opts.
func StartWith(tb testing.TB, opts Options) string {
	tb.Helper()
	bin := testkit.LookPath(tb, "redis-server", "redis-server")
	dir := tb.TempDir()
	var lastErr error
	// The free port is found by binding and releasing it, so another
	// process may take it first; a few attempts absorb that race.
	for attempt := 0; attempt < 3; attempt++ {
		addr, err := startOnce(tb, bin, dir, opts)
		if err == nil {
			return addr
		}
		lastErr = err
	}
	tb.Fatalf("redistest: %v", lastErr)
	return ""
}

// args are the command-line settings of opts, writing what TLS needs
// into dir.
func (o Options) args(port int, dir string) ([]string, error) {
	var args []string
	if o.TLS != nil {
		cert, key := filepath.Join(dir, "redis.crt"), filepath.Join(dir, "redis.key")
		if err := os.WriteFile(cert, o.TLS.CertPEM, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(key, o.TLS.KeyPEM, 0o600); err != nil {
			return nil, err
		}
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(port),
			"--tls-cert-file", cert, "--tls-key-file", key, "--tls-auth-clients", "no")
	} else {
		args = append(args, "--port", strconv.Itoa(port))
	}
	switch {
	case o.User != "":
		args = append(args, "--requirepass", rand.Text(),
			"--user", o.User, "on", ">"+o.Password, "~*", "&*", "+@all")
	case o.Password != "":
		args = append(args, "--requirepass", o.Password)
	}
	return args, nil
}

// client is a client of the server at addr as opts secure it.
func (o Options) client(addr string) *redis.Client {
	c := &redis.Options{Addr: addr, MaxRetries: -1, Username: o.User, Password: o.Password}
	if o.TLS != nil {
		c.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: o.Roots}
	}
	return redis.NewClient(c)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startOnce(tb testing.TB, bin, dir string, opts Options) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	secure, err := opts.args(port, dir)
	if err != nil {
		return "", err
	}
	cmd := exec.Command(bin, append([]string{
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
	}, secure...)...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	client := opts.client(addr)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		select {
		case err := <-exited:
			exited <- err
			return "", fmt.Errorf("redis-server exited early (%v): %s", err, tail(out.String()))
		default:
		}
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := client.Ping(pctx).Err()
		pcancel()
		if err == nil {
			tb.Cleanup(stop)
			return addr, nil
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			stop()
			return "", fmt.Errorf("redis-server on %s not ready after %v: %w", addr, startTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 500 {
		s = s[len(s)-500:]
	}
	return s
}
