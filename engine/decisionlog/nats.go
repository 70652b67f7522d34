package decisionlog

import (
	"context"
	"errors"
	"fmt"
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
}

// NATS is the NATS JetStream sink: each record a message with the
// Nats-Msg-Id header set to its decision id, so that the stream keeps
// each decision once.
type NATS struct {
	opts NATSOptions
	nc   *nats.Conn
	js   jetstream.JetStream
	// ready: the stream exists (checked once per connection).
	ready atomic.Bool
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
	s := &NATS{opts: opts}
	nc, err := nats.Connect(opts.URL,
		nats.Name("svc-sidecar decision log"),
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500*time.Millisecond),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { s.ready.Store(false) }),
	)
	if err != nil {
		return nil, fmt.Errorf("decision log nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("decision log nats: %w", err)
	}
	s.nc, s.js = nc, js
	return s, nil
}

// Name is "nats".
func (s *NATS) Name() string { return "nats" }

// Send publishes the batch and waits for every acknowledgement.
func (s *NATS) Send(ctx context.Context, batch []Record) error {
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
	futures := make([]jetstream.PubAckFuture, 0, len(batch))
	for _, r := range batch {
		m := nats.NewMsg(s.opts.Subject)
		m.Data = r.JSON
		m.Header.Set(jetstream.MsgIDHeader, r.DecisionID)
		f, err := s.js.PublishMsgAsync(m, jetstream.WithExpectStream(s.opts.Stream))
		if err != nil {
			return fmt.Errorf("decision log nats: %w", err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("decision log nats: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("decision log nats: acknowledgements: %w", ctx.Err())
		}
	}
	return nil
}

// Close drains and closes the connection.
func (s *NATS) Close() error {
	s.nc.Close()
	return nil
}
