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
	"errors"
	"fmt"
	"net"
	"os/exec"
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
	bin := testkit.LookPath(tb, "redis-server", "redis-server")
	dir := tb.TempDir()
	var lastErr error
	// The free port is found by binding and releasing it, so another
	// process may take it first; a few attempts absorb that race.
	for attempt := 0; attempt < 3; attempt++ {
		addr, err := startOnce(tb, bin, dir)
		if err == nil {
			return addr
		}
		lastErr = err
	}
	tb.Fatalf("redistest: %v", lastErr)
	return ""
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startOnce(tb testing.TB, bin, dir string) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--daemonize", "no",
	)
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

	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
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
