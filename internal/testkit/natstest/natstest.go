// Package natstest runs a throwaway nats-server with JetStream for tests.
//
// Start looks for the nats-server binary (Debian package nats-server);
// when it is absent the test is skipped, or failed under CI
// (testkit.LookPath).
package natstest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc-dev/svc/internal/testkit"
)

// Server is a running nats-server with JetStream on loopback.
type Server struct {
	tb    testing.TB
	bin   string
	port  int
	store string
	cmd   *exec.Cmd
	done  chan struct{}
	// tlsArgs serve TLS; roots verify it, for the test's own clients.
	tlsArgs []string
	roots   *x509.CertPool
}

// Start runs nats-server with JetStream on a free loopback port, its
// store in a temporary directory, and stops it when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, &Server{})
}

// StartTLS is Start with a server that requires TLS, with the
// certificate cert, which roots verify; its URL is tls://.
func StartTLS(tb testing.TB, cert testkit.Issued, roots *x509.CertPool) *Server {
	tb.Helper()
	dir := tb.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, cert.CertPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, cert.KeyPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	return start(tb, &Server{tlsArgs: []string{"--tls", "--tlscert", certFile, "--tlskey", keyFile}, roots: roots})
}

func start(tb testing.TB, s *Server) *Server {
	s.tb, s.bin, s.store = tb, testkit.LookPath(tb, "nats-server", "nats-server"), tb.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	s.start()
	tb.Cleanup(func() { s.Kill() })
	return s
}

// Pid is the running server's process id (0 when stopped).
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// URL is the server's nats:// URL (tls:// when it serves TLS).
func (s *Server) URL() string {
	if s.tlsArgs != nil {
		return fmt.Sprintf("tls://127.0.0.1:%d", s.port)
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", s.port)
}

func (s *Server) start() {
	s.tb.Helper()
	s.cmd = exec.Command(s.bin, append([]string{"-js", "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-sd", s.store}, s.tlsArgs...)...)
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("natstest: %v", err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	testkit.Eventually(s.tb, "nats-server accepting connections", func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// Kill stops the server at once (SIGKILL), keeping its store.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// Stop stops the server as an operator does (SIGTERM: it closes its
// store cleanly), keeping its store.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.tb.Errorf("natstest: nats-server still running 30 s after SIGTERM; killed")
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
}

// Restart starts the server again on the same port and store (after
// Kill or Stop, or killing it first).
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	s.start()
}

// stream connects to the server and looks stream up; closing
// js.Conn() ends the connection.
func (s *Server) stream(ctx context.Context, tb testing.TB, stream string) (jetstream.JetStream, jetstream.Stream, *jetstream.StreamInfo) {
	tb.Helper()
	var opts []nats.Option
	if s.roots != nil {
		opts = append(opts, nats.Secure(&tls.Config{RootCAs: s.roots, MinVersion: tls.VersionTLS12}))
	}
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		tb.Fatal(err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		nc.Close()
		tb.Fatalf("natstest: stream %s: %v", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		nc.Close()
		tb.Fatal(err)
	}
	return js, st, info
}

// Messages returns every message the JetStream stream holds, in order.
func (s *Server) Messages(tb testing.TB, stream string) []*jetstream.RawStreamMsg {
	tb.Helper()
	ctx := context.Background()
	js, st, info := s.stream(ctx, tb, stream)
	defer js.Conn().Close()
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			tb.Fatalf("natstest: message %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

// MsgIDs reads the whole stream, headers only (fast however large the
// messages), and returns how many messages it holds and their Nats-Msg-Id
// headers, each with how many messages carry it.
func (s *Server) MsgIDs(tb testing.TB, stream string) (msgs int, ids map[string]int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	js, _, info := s.stream(ctx, tb, stream)
	defer js.Conn().Close()
	ids = map[string]int{}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return 0, ids
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{HeadersOnly: true})
	if err != nil {
		tb.Fatalf("natstest: consumer of %s: %v", stream, err)
	}
	total := int(info.State.Msgs)
	for seq := uint64(0); seq < last && msgs < total; {
		// No more than the stream holds: a fetch waits for its batch.
		batch, err := cons.Fetch(min(1000, total-msgs), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			tb.Fatalf("natstest: reading %s: %v", stream, err)
		}
		n := 0
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			if err != nil {
				tb.Fatalf("natstest: reading %s: %v", stream, err)
			}
			seq = meta.Sequence.Stream
			ids[m.Headers().Get(jetstream.MsgIDHeader)]++
			msgs++
			n++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			tb.Fatalf("natstest: reading %s: %v", stream, err)
		}
		if n == 0 {
			tb.Fatalf("natstest: %s ended at sequence %d of %d", stream, seq, last)
		}
	}
	return msgs, ids
}
