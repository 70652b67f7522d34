// Package mysqltest runs a real MariaDB server for a test: Debian's
// mariadb-install-db and mariadbd, in a temporary directory, listening on
// a loopback port, without grant tables (any user, no password). Tests
// skip when MariaDB is not installed, and fail under CI, where
// scripts/install-test-deps.sh installs it.
package mysqltest

import (
	"database/sql"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/svc-dev/svc/internal/testkit"
)

// Server is a running MariaDB.
type Server struct {
	// DSN connects to the database test, in go-sql-driver/mysql's form.
	DSN string
}

// Start initializes a data directory and starts a server that stops
// when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	server := testkit.LookPath(t, "mariadbd", "mariadb-server", "/usr/sbin/mariadbd")
	install := testkit.LookPath(t, "mariadb-install-db", "mariadb-server")
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := testkit.FreePort(t)
	logFile := filepath.Join(dir, "server.log")
	cmd := exec.Command(server, "--no-defaults", "--datadir="+data, "--socket="+filepath.Join(dir, "sock"),
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--user=root", "--skip-grant-tables",
		"--skip-log-bin", "--innodb-flush-log-at-trx-commit=0", "--pid-file="+filepath.Join(dir, "pid"),
		"--log-error="+logFile)
	if err := cmd.Start(); err != nil {
		t.Fatalf("mariadbd: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		if db, err := sql.Open("mysql", cfg.FormatDSN()); err == nil {
			_, err = db.Exec("CREATE DATABASE test")
			db.Close()
			if err == nil {
				break
			}
		}
		select {
		case <-done:
			log, _ := os.ReadFile(logFile)
			t.Fatalf("mariadbd exited:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			t.Fatalf("MariaDB does not take connections on %s:\n%s", addr, log)
		}
	}
	cfg.DBName = "test"
	return &Server{DSN: cfg.FormatDSN()}
}
