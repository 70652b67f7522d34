// Package pgtest runs a real PostgreSQL server for a test: Debian's
// initdb and postgres, as the unprivileged user postgres (the server
// refuses to run as root), in a temporary directory chowned to it,
// listening on a loopback port. Tests skip when PostgreSQL is not
// installed or the test cannot switch users.
package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
)

// Server is a running PostgreSQL.
type Server struct {
	// DSN connects as the superuser postgres to the database postgres,
	// without a password (trust authentication on loopback).
	DSN string
	// Port is the loopback TCP port.
	Port int
}

// binDir finds the directory of initdb and postgres.
func binDir() string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}

// Start initializes a cluster and starts a server that stops when the
// test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binDir()
	if bin == "" {
		t.Skip("PostgreSQL is not installed (apt-get install postgresql)")
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("starting PostgreSQL as user postgres needs root and runuser")
	}
	pg, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("no user postgres")
	}
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	dir, err := os.MkdirTemp("", "svc-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	as := func(name string, args ...string) *exec.Cmd {
		return exec.Command(runuser, append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
	}
	if out, err := as("initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale", "C").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := testkit.FreePort(t)
	logFile := filepath.Join(dir, "postgres.log")
	srv := as("pg_ctl", "-D", data, "-l", logFile, "-w", "-t", "60", "start", "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off", port, dir))
	if out, err := srv.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(logFile)
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	t.Cleanup(func() {
		if out, err := as("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
			t.Logf("pg_ctl stop: %v\n%s", err, out)
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			t.Fatalf("PostgreSQL does not listen on %s: %v\n%s", addr, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &Server{DSN: fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", addr), Port: port}
}
