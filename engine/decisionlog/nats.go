package decisionlog

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSOptions configure the NATS JetStream sink.
type NATSOptions struct {
	// URL is the server, nats://host:port (several comma-separated).
	URL string
	// Subject is where records are published (default svc.decisions).
	Subject string
	// Stream is the JetStream stream that keeps them (default
	// SVC_DECISIONS), created on first connection if missing.
	Stream string
	// DuplicateWindow is the stream's de-duplication window (default
	// 1h): a record sent again within it (the spool re-sends what a
	// crash left unacknowledged) is dropped by the server by its
	// decision id.
	DuplicateWindow time.Duration
	// Timeout bounds one batch's acknowledgements (default 10s).
	Timeout time.Duration
	// RootCAs, when set, are the authorities a tls:// server's
	// certificate is verified against instead of the system's.
	RootCAs *x509.CertPool
}

// NATS is the NATS JetStream sink: each record a message with the
// Nats-Msg-Id header set to its decision id, so that the stream keeps
// each decision once.
//
// The message has no other header: the acknowledgement names the stream
// that stored it, and one that is not Stream fails the batch, as the
// Nats-Expected-Stream header would have had the server refuse it, at
// half the cost of building the headers of every message. Only a stream
// deleted and another created on the subject meanwhile leads there
// (streams of an account cannot share subjects), and the sink then sets
// Stream up again, which says why it cannot.
//
// A batch is published with core NATS publishes, every message with the
// same reply subject, one per batch below an inbox that a single
// subscription takes; Send returns once as many acknowledgements as
// messages came back, none an error. JetStream answers each published
// message exactly once (an ack, a duplicate's ack, an error, or no
// responders), so a missing one is a message lost on the way and the
// batch times out and is sent again: the server drops what it already
// has by its id. This is what nats.go's PublishMsgAsync does, less its
// future, timer, map entry and JSON decoding per message.
type NATS struct {
	opts NATSOptions
	nc   *nats.Conn
	js   jetstream.JetStream
	// ready: the stream exists (checked once per connection, and again
	// after an acknowledgement said it did not); stream is its member of
	// an acknowledgement, "stream":"NAME".
	ready  atomic.Bool
	stream []byte
	// maxRecord is MaxRecordBytes, from the server's max_payload.
	maxRecord atomic.Int64
	// inbox is the prefix of the batches' reply subjects; acks is its
	// subscription.
	inbox string
	acks  *nats.Subscription
	// msg is Send's message, reused: PublishMsg copies it out before it
	// returns. Send runs from one goroutine at a time (sending).
	sending sync.Mutex
	msg     *nats.Msg
	// batch is the state of the batch waiting for acknowledgements.
	mu    sync.Mutex
	batch natsBatch
}

// natsBatch counts the acknowledgements of one batch.
type natsBatch struct {
	gen  uint64
	want int
	got  int
	err  error
	done chan struct{} // closed once got == want or at the first error
}

// NewNATS connects to opts.URL; the connection reconnects on its own,
// and batches fail meanwhile (the spool keeps them).
func NewNATS(opts NATSOptions) (*NATS, error) {
	if opts.Subject == "" {
		opts.Subject = "svc.decisions"
	}
	if opts.Stream == "" {
		opts.Stream = "SVC_DECISIONS"
	}
	if opts.DuplicateWindow <= 0 {
		opts.DuplicateWindow = time.Hour
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	name, err := json.Marshal(opts.Stream)
	if err != nil {
		return nil, fmt.Errorf("decision log nats: stream %q: %w", opts.Stream, err)
	}
	s := &NATS{opts: opts, stream: append([]byte(`"stream":`), name...)}
	connOpts := []nats.Option{
		nats.Name("svc-sidecar decision log"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { s.ready.Store(false) }),
		// The server's max_payload, learnt on each connection: another
		// server of the cluster may have another.
		nats.ConnectHandler(s.learnMaxPayload),
		nats.ReconnectHandler(s.learnMaxPayload),
	}
	if opts.RootCAs != nil {
		connOpts = append(connOpts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: opts.RootCAs}))
	}
	nc, err := nats.Connect(opts.URL, connOpts...)
	if err != nil {
		return nil, fmt.Errorf("decision log nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("decision log nats: %w", err)
	}
	s.nc, s.js = nc, js
	if nc.IsConnected() {
		s.learnMaxPayload(nc)
	}
	s.inbox = nc.NewRespInbox() + "."
	// Acknowledgements of a whole batch may arrive before Send waits.
	if s.acks, err = nc.Subscribe(s.inbox+"*", s.onAck); err != nil {
		nc.Close()
		return nil, fmt.Errorf("decision log nats: %w", err)
	}
	_ = s.acks.SetPendingLimits(-1, -1)
	s.msg = &nats.Msg{Subject: opts.Subject, Header: nats.Header{jetstream.MsgIDHeader: []string{""}}}
	return s, nil
}

// Name is "nats".
func (s *NATS) Name() string { return "nats" }

// natsHeaderRoom is what a message's headers may take of the server's
// max_payload: "NATS/1.0", the Nats-Msg-Id header and the decision id.
const natsHeaderRoom = 1 << 10

func (s *NATS) learnMaxPayload(nc *nats.Conn) {
	s.maxRecord.Store(max(nc.MaxPayload()-natsHeaderRoom, 0))
}

// MaxRecordBytes is the largest record the server takes in one message
// (its max_payload, 1 MiB by default, less room for the headers); 0
// before the first connection.
func (s *NATS) MaxRecordBytes() int { return int(s.maxRecord.Load()) }

// Send publishes the batch and waits for every acknowledgement.
func (s *NATS) Send(ctx context.Context, batch []Record) error {
	if len(batch) == 0 {
		return nil
	}
	s.sending.Lock()
	defer s.sending.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if !s.nc.IsConnected() {
		return errors.New("decision log nats: not connected")
	}
	if !s.ready.Load() {
		if _, err := s.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: s.opts.Stream, Subjects: []string{s.opts.Subject}, Duplicates: s.opts.DuplicateWindow,
		}); err != nil {
			return fmt.Errorf("decision log nats: stream %s: %w", s.opts.Stream, err)
		}
		s.ready.Store(true)
	}
	s.mu.Lock()
	gen := s.batch.gen + 1
	done := make(chan struct{})
	s.batch = natsBatch{gen: gen, want: len(batch), done: done}
	s.mu.Unlock()
	defer func() {
		// Acknowledgements still on their way are of no batch now.
		s.mu.Lock()
		s.batch.want = -1
		s.mu.Unlock()
	}()
	m := s.msg
	m.Reply = s.inbox + strconv.FormatUint(gen, 10)
	id := m.Header[jetstream.MsgIDHeader]
	for _, r := range batch {
		id[0], m.Data = r.DecisionID, r.JSON
		err := s.nc.PublishMsg(m)
		m.Data = nil
		if err != nil {
			return fmt.Errorf("decision log nats: %w", err)
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		got := s.batch.got
		s.mu.Unlock()
		return fmt.Errorf("decision log nats: %d of %d acknowledgements: %w", got, len(batch), ctx.Err())
	}
	s.mu.Lock()
	err := s.batch.err
	s.mu.Unlock()
	return err
}

// onAck counts an acknowledgement of the batch whose reply subject it
// came to.
func (s *NATS) onAck(m *nats.Msg) {
	gen, err := strconv.ParseUint(m.Subject[min(len(s.inbox), len(m.Subject)):], 10, 64)
	if err != nil {
		return
	}
	ackErr := checkPubAck(m, s.stream)
	if errors.Is(ackErr, errNoStream) {
		s.ready.Store(false)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &s.batch
	if b.gen != gen || b.want < 0 || b.got >= b.want || (b.err != nil) {
		return
	}
	b.got++
	if ackErr != nil {
		b.err = ackErr
		close(b.done)
		return
	}
	if b.got == b.want {
		close(b.done)
	}
}

// errNoStream is the error of an acknowledgement saying that the stream
// is not there: the sink sets it up again before the next batch.
var errNoStream = errors.New("decision log nats: the stream is gone")

// checkPubAck reads a JetStream publish acknowledgement: nil for
// {"stream":...,"seq":...} (a duplicate's too) where stream is its
// "stream" member, else the error it says. The stream's name and the
// server's error text are all it looks for, so JSON is not decoded.
func checkPubAck(m *nats.Msg, stream []byte) error {
	d := m.Data
	if len(d) == 0 {
		if m.Header.Get("Status") == "503" {
			return fmt.Errorf("%w: no stream takes the subject (no responders)", errNoStream)
		}
		return errors.New("decision log nats: empty acknowledgement")
	}
	if bytes.Contains(d, []byte(`"error"`)) {
		desc := d
		if _, after, ok := bytes.Cut(d, []byte(`"description":"`)); ok {
			if v, _, ok := bytes.Cut(after, []byte(`"`)); ok {
				desc = v
			}
		}
		return fmt.Errorf("decision log nats: publish refused: %s", desc)
	}
	if !bytes.Contains(d, stream) {
		if bytes.Contains(d, []byte(`"stream":"`)) {
			return fmt.Errorf("%w: the acknowledgement is of another stream, not %s: %.100s", errNoStream, stream[len(`"stream":`):], d)
		}
		return fmt.Errorf("decision log nats: not an acknowledgement: %.100s", d)
	}
	return nil
}

// Close drains and closes the connection.
func (s *NATS) Close() error {
	s.nc.Close()
	return nil
}
