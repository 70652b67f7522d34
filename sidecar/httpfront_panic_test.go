package sidecar

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/svc-dev/svc/envoy"
)

// TestFrontSurvivesPanickingCheck: a check whose decision panics ends its
// own connection without an answer, as net/http does for a handler, and
// leaves the process, the in-flight count and other connections alone.
func TestFrontSurvivesPanickingCheck(t *testing.T) {
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f := newFront(s, &http.Server{ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute})
	f.serve = func(context.Context, http.ResponseWriter, *envoy.FrontRequest, *frontConn) { panic("decision failed") }
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go f.Serve(lis) //nolint:errcheck // ends with Close
	t.Cleanup(f.Close)
	for i := range 2 {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /check HTTP/1.1\r\nHost: app\r\nX-Forwarded-Uri: /\r\nX-Forwarded-Method: GET\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(c); err != nil || len(b) != 0 {
			t.Fatalf("connection %d: read %q, %v; want the connection closed without an answer", i, b, err)
		}
		c.Close()
	}
	if n := s.inflight.Load(); n != 0 {
		t.Fatalf("in flight = %d after the panics, want 0", n)
	}
}
