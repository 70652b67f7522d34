package listeners

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// handOver hands old's listeners over as an exec would and returns the
// files and environment value of the next image; the files are closed
// when t ends, if the test has not closed them before.
func handOver(t *testing.T, old *Set) ([]*os.File, string) {
	t.Helper()
	files, env, err := old.Handover()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range files {
			f.Close()
		}
	})
	return files, env
}

// TestHandoverKeepsSocketListening hands a listener over within one
// process, as exec would: between the old listener's close and the new
// one's first Accept, a client connects and is not refused; the new
// listener then accepts that very connection.
func TestHandoverKeepsSocketListening(t *testing.T) {
	old, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	l, err := old.Listen("grpc", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	files, env := handOver(t, old)
	if !strings.HasPrefix(env, "grpc=") || !strings.HasSuffix(env, "@127.0.0.1:0") {
		t.Errorf("%s = %q, want grpc=<fd>@127.0.0.1:0", EnvVar, env)
	}
	l.Close() // the old image stops serving

	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("a connection between the two images was refused: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}

	next, err := New(env)
	if err != nil {
		t.Fatal(err)
	}
	nl, err := next.Listen("grpc", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	next.Close()
	for _, f := range files {
		f.Close()
	}
	if !next.TookOver() || nl.Addr().String() != addr {
		t.Fatalf("took over %v on %s, want the inherited %s", next.TookOver(), nl.Addr(), addr)
	}
	got, err := nl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	buf := make([]byte, 4)
	got.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := got.Read(buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v; want the queued connection's ping", buf, err)
	}
}

// TestAddressChanged: an inherited listener for another address is not
// taken over.
func TestAddressChanged(t *testing.T) {
	old, _ := New("")
	l, err := old.Listen("http", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, env := handOver(t, old)
	next, err := New(env)
	if err != nil {
		t.Fatal(err)
	}
	nl, err := next.Listen("http", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer nl.Close()
	next.Close()
	if next.TookOver() || nl.Addr().String() == l.Addr().String() {
		t.Errorf("took over a listener of another address")
	}
}

func TestMalformed(t *testing.T) {
	for _, v := range []string{"grpc", "grpc=x@a", "=3@a", "grpc=1@a", "grpc=7@a;grpc=8@b"} {
		if _, err := New(v); err == nil || !strings.Contains(err.Error(), EnvVar) {
			t.Errorf("New(%q) = %v, want an error naming %s", v, err, EnvVar)
		}
	}
}
