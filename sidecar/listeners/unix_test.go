package listeners

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnixSocketNeverBroader binds with umask 0, so that bind(2) makes
// the socket file srwxrwxrwx, in a directory others may enter: at the
// instant the bind returns, the socket must not be at its path and must
// sit in a directory only its owner can enter; once Open returns it is
// at its path with the configured mode.
func TestUnixSocketNeverBroader(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "http.sock")
	old := syscall.Umask(0)
	defer syscall.Umask(old)

	var seen struct {
		called    bool
		pathErr   error
		boundDir  string
		dirMode   os.FileMode
		boundMode os.FileMode
	}
	afterBind = func(bound string) {
		seen.called = true
		_, seen.pathErr = os.Lstat(path)
		seen.boundDir = filepath.Dir(bound)
		if st, err := os.Stat(seen.boundDir); err == nil {
			seen.dirMode = st.Mode().Perm()
		}
		if st, err := os.Lstat(bound); err == nil {
			seen.boundMode = st.Mode().Perm()
		}
	}
	defer func() { afterBind = nil }()

	l, err := Open(UnixScheme+path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if !seen.called {
		t.Fatal("the bind hook was not called")
	}
	if seen.pathErr == nil {
		t.Errorf("the socket was at %s right after the bind, before its mode was set", path)
	}
	if seen.boundMode&^0o600 != 0 && (seen.boundDir == dir || seen.dirMode != 0o700) {
		t.Errorf("right after the bind the socket had mode %v in %s (mode %v): others could connect",
			seen.boundMode, seen.boundDir, seen.dirMode)
	}
	st, err := os.Lstat(path)
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want a socket with mode 0600", path, st, err)
	}
	if l.Addr().String() != path {
		t.Errorf("Addr = %s, want %s", l.Addr(), path)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%s holds %d entries, want the socket alone (the private directory removed)", dir, len(entries))
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", path, err)
	}
	c.Close()
	l.Close()
	if _, err := os.Lstat(path); err == nil {
		t.Error("Close left the socket file")
	}
}

// TestUnixSocketKeepsOtherFile: a file that is not a socket at the path
// is an error, and stays.
func TestUnixSocketKeepsOtherFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "http.sock")
	if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := Open(UnixScheme+path, 0o600); err == nil {
		l.Close()
		t.Fatal("Open replaced a regular file")
	} else if !strings.Contains(err.Error(), "already in use") {
		t.Errorf("err = %v, want address already in use", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep" {
		t.Errorf("the file at the path is now %q, %v", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("%s holds %d entries, want the file alone", dir, len(entries))
	}
}

// TestUnixSocketHandover: a Unix socket handed over keeps its file at
// the path and is taken over under its configured address.
func TestUnixSocketHandover(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grpc.sock")
	addr := UnixScheme + path
	old, _ := New("")
	l, err := old.Listen("grpc", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, env := handOver(t, old)
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the old image's Close removed the handed-over socket: %v", err)
	}
	next, err := New(env)
	if err != nil {
		t.Fatal(err)
	}
	nl, err := next.Listen("grpc", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	next.Close()
	if !next.TookOver() || nl.Addr().String() != path {
		t.Errorf("took over %v at %s, want %s", next.TookOver(), nl.Addr(), path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		t.Fatalf("dial after the handover: %v", err)
	}
	c.Close()
}

// TestUnixSocketPathTooDeep: a path whose private bind path would not fit
// a socket address is refused with an error that says so.
func TestUnixSocketPathTooDeep(t *testing.T) {
	dir := t.TempDir()
	deep := filepath.Join(dir, strings.Repeat("d", maxSocketPath-len(dir)-8))
	if err := os.Mkdir(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(deep, "a.sock")
	_, err := Open(UnixScheme+path, 0o600)
	if err == nil || !strings.Contains(err.Error(), "too deep") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open(%d-byte path) = %v, want an error saying the directory is too deep", len(path), err)
	}
	if entries, _ := os.ReadDir(deep); len(entries) != 0 {
		t.Errorf("%s holds %d entries, want none", deep, len(entries))
	}
}
