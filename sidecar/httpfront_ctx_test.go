package sidecar

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/envoy"
)

// startBareFront serves a front whose checks are decided by serve and
// whose other requests net/http answers with "net/http" and 200.
func startBareFront(t *testing.T, std *http.Server, serve func(context.Context, http.ResponseWriter, *envoy.FrontRequest, *frontConn)) (*front, string) {
	t.Helper()
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	std.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "net/http") }) //nolint:errcheck
	f := newFront(s, std)
	f.serve = serve
	f.probeEvery = 10 * time.Millisecond
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go f.Serve(lis)         //nolint:errcheck // ends with Close
	go std.Serve(f.handoff) //nolint:errcheck // ends with Close
	t.Cleanup(func() { f.Close(); std.Close() })
	return f, lis.Addr().String()
}

const frontCheckRequest = "GET /check HTTP/1.1\r\nHost: app\r\nX-Forwarded-Uri: /\r\nX-Forwarded-Method: GET\r\n\r\n"

// blockingCheck is a check that reports its start on started and waits
// for its context to end (reported on ended) or for release.
func blockingCheck(started chan<- struct{}, ended chan<- error, release <-chan struct{}) func(context.Context, http.ResponseWriter, *envoy.FrontRequest, *frontConn) {
	return func(ctx context.Context, w http.ResponseWriter, _ *envoy.FrontRequest, _ *frontConn) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
		case <-release:
			ended <- nil
			w.WriteHeader(http.StatusOK)
		case <-time.After(10 * time.Second):
			ended <- nil
		}
	}
}

// sendCheck sends a check request on a new connection to addr.
func sendCheck(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, frontCheckRequest); err != nil {
		t.Fatal(err)
	}
	return c
}

// wantCancelled waits for a blockingCheck to end with its context
// cancelled.
func wantCancelled(t *testing.T, ended <-chan error) {
	t.Helper()
	select {
	case err := <-ended:
		if err != context.Canceled {
			t.Fatalf("check ended with %v, want its context cancelled", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the check's context was not cancelled")
	}
}

// TestFrontCancelsCheckOfHungUpClient: a check in flight whose client
// hangs up (closes or resets the connection) sees its context cancelled,
// as a net/http handler's request context is.
func TestFrontCancelsCheckOfHungUpClient(t *testing.T) {
	for _, hangUp := range []string{"close", "reset"} {
		t.Run(hangUp, func(t *testing.T) {
			started, ended := make(chan struct{}, 1), make(chan error, 1)
			_, addr := startBareFront(t, &http.Server{ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute},
				blockingCheck(started, ended, nil))
			c := sendCheck(t, addr)
			<-started
			if hangUp == "reset" {
				_ = c.(*net.TCPConn).SetLinger(0)
			}
			c.Close()
			wantCancelled(t, ended)
		})
	}
}

// TestFrontKeepsCheckOfWaitingClient: a check that takes many probes'
// time is not cancelled while its client waits, answers, and the
// connection serves the next check, which was sent meanwhile.
func TestFrontKeepsCheckOfWaitingClient(t *testing.T) {
	started, ended, release := make(chan struct{}, 1), make(chan error, 1), make(chan struct{})
	_, addr := startBareFront(t, &http.Server{ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute},
		blockingCheck(started, ended, release))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for i := range 2 {
		if i == 0 {
			if _, err := io.WriteString(c, frontCheckRequest); err != nil {
				t.Fatal(err)
			}
		}
		<-started
		if i == 0 {
			// The next request, pipelined, waits in the socket.
			if _, err := io.WriteString(c, frontCheckRequest); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(100 * time.Millisecond)
		release <- struct{}{}
		if err := <-ended; err != nil {
			t.Fatalf("check %d ended with %v while its client waited", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("check %d: status %d", i, resp.StatusCode)
		}
	}
}

// TestFrontCloseCancelsChecks: closing the server cancels the checks in
// flight, and so does a drain that gives up on them.
func TestFrontCloseCancelsChecks(t *testing.T) {
	for _, stop := range []string{"close", "drain timeout"} {
		t.Run(stop, func(t *testing.T) {
			started, ended := make(chan struct{}, 1), make(chan error, 1)
			f, addr := startBareFront(t, &http.Server{ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute},
				blockingCheck(started, ended, nil))
			c := sendCheck(t, addr)
			defer c.Close()
			<-started
			if stop == "close" {
				f.Close()
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				if err := f.Shutdown(ctx); err == nil {
					t.Fatal("Shutdown returned before the check ended")
				}
			}
			wantCancelled(t, ended)
		})
	}
}

// TestFrontHandsOverBareLF: a request whose header lines end in a bare
// LF, which net/http reads, is handed to net/http at once rather than
// waiting for a CRLF CRLF until ReadHeaderTimeout.
func TestFrontHandsOverBareLF(t *testing.T) {
	check := func(_ context.Context, w http.ResponseWriter, _ *envoy.FrontRequest, _ *frontConn) {
		io.WriteString(w, "front") //nolint:errcheck
	}
	_, addr := startBareFront(t, &http.Server{ReadHeaderTimeout: 20 * time.Second, IdleTimeout: time.Minute}, check)
	for name, raw := range map[string]string{
		"every line":   "GET /check HTTP/1.1\nHost: app\nX-Forwarded-Uri: /\n\n",
		"the last one": "GET /check HTTP/1.1\r\nHost: app\r\nX-Forwarded-Uri: /\r\n\n",
		"in two parts": "GET /check HTTP/1.1\r\nHost: app\r\n|\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(3 * time.Second))
			for part := range strings.SplitSeq(raw, "|") {
				if _, err := io.WriteString(c, part); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(body) != "net/http" {
				t.Fatalf("answer %d %q, want net/http's", resp.StatusCode, body)
			}
		})
	}
}
