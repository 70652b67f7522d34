package engine

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/svc-dev/svc/internal/secretfile"
	"github.com/svc-dev/svc/internal/tlsfiles"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/decisionlog"
	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/reason"
	"go.opentelemetry.io/otel/trace"
)

// openDecisionLog sets up [decision_log]: the spool in spool_dir and the
// sink, shipping until ctx ends (e.decisionsDone is closed then).
// Without a sink it does nothing.
func (e *Engine) openDecisionLog(ctx context.Context) error {
	d := e.cfg.DecisionLog
	if !d.Enabled() {
		close(e.decisionsDone)
		return nil
	}
	sink, err := newDecisionSink(d, e.cfg.SDK.ServiceName)
	if err != nil {
		key, _ := fileSetting(err, "decision_log.url")
		return &SettingError{Key: key, Origin: e.cfg.Origin(key), Msg: err.Error(), Err: err}
	}
	overflow := spool.DropOldest
	if d.Overflow == config.DecisionLogDeny {
		overflow = spool.Deny
	}
	l, err := decisionlog.New(decisionlog.Options{
		Spool:         spool.Options{Dir: d.SpoolDir, MaxBytes: d.SpoolMaxBytes, Overflow: overflow, Now: e.now},
		FsyncInterval: d.FsyncInterval.Duration, BatchMaxRecords: d.BatchMaxRecords, FlushInterval: d.FlushInterval.Duration,
		Logger: e.log.With("component", "decision_log"),
	}, sink)
	if err != nil {
		_ = sink.Close()
		return &SettingError{Key: "decision_log.spool_dir", Origin: e.cfg.Origin("decision_log.spool_dir"), Msg: err.Error(), Err: err}
	}
	e.decisions = l
	go func() {
		defer close(e.decisionsDone)
		if err := l.Run(ctx); err != nil {
			e.log.Error("decision log stopped", "err", err)
		}
	}()
	return nil
}

// fileSetting is the setting of the file that err is about (a secret
// file, a CA file) and the error without that setting's name, or
// fallback and err when it is about none.
func fileSetting(err error, fallback string) (key string, inner error) {
	var se *secretfile.Error
	var fe *tlsfiles.FileError
	switch {
	case errors.As(err, &se):
		return se.Key, se.Err
	case errors.As(err, &fe):
		return fe.Key, fe.Err
	}
	return fallback, err
}

// readCAFile is the pool of the PEM certificates in the file of
// decision_log.tls_ca_file, nil when it is not set.
func readCAFile(path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	return tlsfiles.CAPool("decision_log.tls_ca_file", path)
}

// decisionSinkFiles is what the files of a decision_log sink hold: the
// CA pool of tls_ca_file, the HTTP sink's bearer token and the Kafka SASL
// password. Errors name the setting, never a secret. Check reads them as
// the start does.
type decisionSinkFiles struct {
	roots         *x509.CertPool
	token, saslPW string
}

func readDecisionSinkFiles(d config.DecisionLog) (decisionSinkFiles, error) {
	var f decisionSinkFiles
	var err error
	if f.roots, err = readCAFile(d.TLSCAFile); err != nil {
		return f, err
	}
	if d.Sink == config.DecisionLogKafka && d.KafkaSASLMechanism != "" {
		if f.saslPW, err = secretfile.Read("decision_log.kafka_sasl_password_file", d.KafkaSASLPasswordFile); err != nil {
			return f, err
		}
	}
	if d.Sink == config.DecisionLogHTTP && d.HTTPTokenFile != "" {
		if f.token, err = secretfile.Read("decision_log.http_token_file", d.HTTPTokenFile); err != nil {
			return f, err
		}
		f.token = strings.TrimSpace(f.token)
	}
	return f, nil
}

// newDecisionSink is the client of decision_log.sink; service is the
// sidecar's service name (sdk.service_name), which the OTLP log records
// carry as their resource's service.name, like the spans.
func newDecisionSink(d config.DecisionLog, service string) (decisionlog.Sink, error) {
	files, err := readDecisionSinkFiles(d)
	if err != nil {
		return nil, err
	}
	roots := files.roots
	switch d.Sink {
	case config.DecisionLogNATS:
		return decisionlog.NewNATS(decisionlog.NATSOptions{
			URL: d.URL, Subject: d.Subject, Stream: d.NATSStream, DuplicateWindow: d.NATSDuplicateWindow.Duration, RootCAs: roots,
		})
	case config.DecisionLogKafka:
		opts := decisionlog.KafkaOptions{URL: d.URL, Topic: d.KafkaTopic, RootCAs: roots}
		if d.KafkaSASLMechanism != "" {
			opts.SASL = decisionlog.KafkaSASL{Mechanism: d.KafkaSASLMechanism, User: d.KafkaSASLUsername, Password: files.saslPW}
		}
		return decisionlog.NewKafka(opts)
	case config.DecisionLogHTTP:
		return decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: d.URL, Token: files.token, RootCAs: roots})
	case config.DecisionLogOTLP:
		return decisionlog.NewOTLP(decisionlog.OTLPOptions{URL: d.URL, ServiceName: service, RootCAs: roots})
	default:
		// Configuration validation refuses any other value.
		return nil, fmt.Errorf("decision_log.sink %q is not a sink", d.Sink)
	}
}

// recordBufs are logDecision's buffers, spared their growth on every
// decision.
var recordBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// logDecision appends the decision record of rec (the audit record) with
// the redacted policy input to the decision log's spool; src, when not
// nil, is where the input's request headers and query are read from, and
// sc, when valid, the trace and span ids of a record without them. A full spool
// under overflow = "deny" is an error of code decision-log-unavailable:
// the decision must not be answered unlogged.
//
// A record larger than the spool takes (a segment: spool_max_bytes / 16,
// at least 64 KiB) or than the sink takes in one message (NATS's
// max_payload, Kafka's batch bound, an OTLP request) goes without its
// input, "input_omitted" saying so (appendOversizedRecord), and one still
// too large (a resource id of megabytes) with its strings clipped,
// "truncated" saying so (appendTruncatedRecord): a decision is never
// refused for the size of what the caller sent, and no record the sink
// would refuse each time holds up the records behind it.
//
// The record is built once, in a buffer of its own behind the spool's
// head (decision id, tenant), and copied once, into the spool's file.
func (e *Engine) logDecision(rec *audit.Record, in *Input, src RequestSource, sc trace.SpanContext) error {
	bp := recordBufs.Get().(*[]byte)
	b := decisionlog.AppendHead((*bp)[:0], rec.DecisionID, rec.Tenant)
	head := len(b)
	b = e.appendDecisionRecord(b, rec, in, src, sc)
	defer func() {
		if cap(b) <= 64<<10 {
			*bp = b[:0]
			recordBufs.Put(bp)
		}
	}()
	var err error
	if b, err = e.maskSpooled(b, head); err != nil {
		return err
	}
	// LogEncoded copies the record to the spool's file before it returns.
	err = e.decisions.LogEncoded(b)
	omitted := false
	if errors.Is(err, decisionlog.ErrTooLarge) && e.cfg.DecisionLog.IncludesInput() {
		b = e.appendOversizedRecord(b[:head], rec, sc)
		if b, err = e.maskSpooled(b, head); err != nil {
			return err
		}
		err, omitted = e.decisions.LogEncoded(b), true
	}
	if errors.Is(err, decisionlog.ErrTooLarge) {
		b = e.appendTruncatedRecord(b[:head], rec, sc, omitted)
		if b, err = e.maskSpooled(b, head); err != nil {
			return err
		}
		err = e.decisions.LogEncoded(b)
	}
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, decisionlog.ErrFull) && e.cfg.DecisionLog.Overflow == config.DecisionLogDeny:
		return reason.New(reason.DecisionLogUnavailable, "the decision log's spool is full (decision_log.overflow = deny)")
	case errors.Is(err, decisionlog.ErrFull):
		// drop_oldest with nothing older to drop: the segment written
		// to holds the whole spool_max_bytes.
		return reason.New(reason.DecisionLogUnavailable, "the decision log's spool is full")
	case errors.Is(err, decisionlog.ErrTooLarge):
		e.decisions.CountRefusal(err)
		return reason.New(reason.DecisionLogUnavailable, "the decision record is larger than the decision log takes, even truncated")
	}
	return reason.Wrap(reason.DecisionLogUnavailable, err, "the decision log's spool cannot be written")
}

// maskSpooled applies decision_log.mask to the record that follows the
// spool's head in b[head:].
func (e *Engine) maskSpooled(b []byte, head int) ([]byte, error) {
	if e.decisionMask.Empty() {
		return b, nil
	}
	masked, err := e.maskRecord(b[head:])
	if err != nil {
		return b, reason.Wrap(reason.DecisionLogUnavailable, err, "the decision record cannot be masked")
	}
	return append(b[:head], masked...), nil
}

// decisionLogStatus is the state of [decision_log]; nil without a sink.
func (e *Engine) decisionLogStatus() *decisionlog.Stats {
	if e.decisions == nil {
		return nil
	}
	st := e.decisions.Stats()
	return &st
}
