package testkit

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Listen returns a listener on a free loopback TCP port, closed when t
// ends.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lis.Close() })
	return lis
}

// ServeGRPC serves the services register adds, on a server with opts, on
// a loopback TCP port until t ends, then stops gracefully; it returns the
// address.
func ServeGRPC(t testing.TB, register func(*grpc.Server), opts ...grpc.ServerOption) string {
	t.Helper()
	lis := Listen(t)
	g := grpc.NewServer(opts...)
	register(g)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	t.Cleanup(func() {
		g.GracefulStop()
		if err := <-done; err != nil {
			t.Errorf("grpc serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// DialGRPC returns a plaintext client connection to addr, closed when t
// ends.
func DialGRPC(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// BlackHole accepts TCP connections on a loopback port and never
// answers, as a peer that hangs; it returns the address.
func BlackHole(t testing.TB) string {
	t.Helper()
	lis := Listen(t)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return lis.Addr().String()
}

// DeadAddr returns a loopback address nobody listens on: a listener was
// opened there and closed, so connecting is refused.
func DeadAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// Redirector is a server on a loopback port that answers every request
// with 302 Found to its target, which the test may move while clients
// follow it.
type Redirector struct {
	// URL is the server's base URL.
	URL string

	mu     sync.Mutex
	target string
}

// StartRedirector serves redirects to target until t ends.
func StartRedirector(t testing.TB, target string) *Redirector {
	t.Helper()
	r := &Redirector{target: target}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		to := r.target
		r.mu.Unlock()
		http.Redirect(w, req, to, http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// MoveTo makes the redirects point at target from now on.
func (r *Redirector) MoveTo(target string) {
	r.mu.Lock()
	r.target = target
	r.mu.Unlock()
}

// FreePort returns a loopback TCP port that was free a moment ago: a
// server started on it may still find it taken, and should retry.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
