package testkit

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

// NonLoopbackIPv4 returns an IPv4 address of this host outside loopback
// and link-local, where a test server stands for a host elsewhere on the
// network, or "" when the host has none.
func NonLoopbackIPv4() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// ServeOn serves h on a free port of ip until t ends, or returns nil when
// ip cannot be listened on. A server on NonLoopbackIPv4 is what a client
// must treat as remote: plain http to it crosses the network.
func ServeOn(t testing.TB, ip string, h http.Handler) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}
