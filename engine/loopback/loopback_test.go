package loopback

import (
	"net/url"
	"testing"
)

func TestHostAndSecureURL(t *testing.T) {
	tests := []struct {
		raw    string
		host   bool
		secure bool
	}{
		{"http://localhost:7700/x", true, true},
		{"http://LocalHost/x", true, true},
		{"http://127.0.0.1/x", true, true},
		{"http://127.9.9.9/x", true, true},
		{"http://[::1]:9/x", true, true},
		{"http://10.0.0.1/x", false, false},
		{"http://localhost.example.com/x", false, false},
		{"http://[::ffff:10.0.0.1]/x", false, false},
		{"https://idp.example.com/x", false, true},
		{"https://127.0.0.1/x", true, true},
		{"ftp://localhost/x", true, false},
		{"ws://localhost/x", true, false},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := Host(u.Hostname()); got != tt.host {
			t.Errorf("Host(%q) = %v, want %v", u.Hostname(), got, tt.host)
		}
		if got := SecureURL(u); got != tt.secure {
			t.Errorf("SecureURL(%s) = %v, want %v", tt.raw, got, tt.secure)
		}
	}
}

func TestListenAddr(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:7701", true},
		{"127.0.0.2:0", true},
		{"[::1]:50051", true},
		{"localhost:7700", true},
		{"unix:///run/svc/grpc.sock", true},
		{"0.0.0.0:7701", false},
		{"[::]:7701", false},
		{":7701", false},
		{"10.0.0.5:7701", false},
		{"app.internal:7701", false},
		{"localhost.example.com:7701", false},
		{"127.0.0.1", false}, // not host:port
		{"", false},
	}
	for _, tt := range tests {
		if got := ListenAddr(tt.addr); got != tt.want {
			t.Errorf("ListenAddr(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}
