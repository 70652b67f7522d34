package decisionlog

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	logsv1 "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	otlplogs "go.opentelemetry.io/proto/otlp/logs/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// OTLPOptions configure the OTLP logs sink.
type OTLPOptions struct {
	// URL is the collector's OTLP gRPC endpoint: http://host:port
	// (plaintext) or https://host:port (TLS, verified against RootCAs,
	// else the system's roots).
	URL string
	// RootCAs, when set, are the authorities an https:// collector's
	// certificate is verified against instead of the system's.
	RootCAs *x509.CertPool
	// ServiceName is the resource's service.name (default svc-sidecar),
	// the one the sidecar's spans carry.
	ServiceName string
	// Timeout bounds one batch's exports (default 10s).
	Timeout time.Duration
}

// otlpRequestBytes bounds the records' JSON in one export request, well
// under gRPC's default 4 MiB limit on a message a server receives; a
// larger batch is sent in several requests.
const otlpRequestBytes = 2 << 20

// MaxRecordBytes is the largest record one export request takes
// (otlpRequestBytes): a single larger one could pass the collector's
// limit on a request and be refused each time.
func (s *OTLP) MaxRecordBytes() int { return otlpRequestBytes }

// otlpScope is the instrumentation scope of the log records.
const otlpScope = "github.com/svc-dev/svc/engine/decisionlog"

// OTLP is the OTLP logs sink: each record one log record whose body is
// the record's JSON as a string, with the decision id, tenant, outcome
// and reason code as attributes and the decision's trace and span ids,
// so that a collector correlates it with the decision's trace. A batch
// is acknowledged only when every export request of it returned OK
// without rejecting a log record.
type OTLP struct {
	opts   OTLPOptions
	conn   *grpc.ClientConn
	client logsv1.LogsServiceClient
	res    *resourcev1.Resource
}

// NewOTLP sets up the client of opts.URL; it connects on the first
// batch and reconnects on its own, and batches fail meanwhile (the spool
// keeps them).
func NewOTLP(opts OTLPOptions) (*OTLP, error) {
	if opts.ServiceName == "" {
		opts.ServiceName = "svc-sidecar"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("decision log otlp: url: %w", err)
	}
	var creds credentials.TransportCredentials
	switch u.Scheme {
	case "http":
		creds = insecure.NewCredentials()
	case "https":
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: opts.RootCAs})
	default:
		return nil, fmt.Errorf("decision log otlp: url must be http://host:port or https://host:port, got scheme %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("decision log otlp: url has no host")
	}
	conn, err := grpc.NewClient(u.Host, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("decision log otlp: %w", err)
	}
	return &OTLP{
		opts: opts, conn: conn, client: logsv1.NewLogsServiceClient(conn),
		res: &resourcev1.Resource{Attributes: []*commonv1.KeyValue{strAttr("service.name", opts.ServiceName)}},
	}, nil
}

// Name is "otlp".
func (s *OTLP) Name() string { return "otlp" }

// Send exports the batch, in several requests when it is large, and
// fails unless the collector took every log record.
func (s *OTLP) Send(ctx context.Context, batch []Record) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	now := uint64(time.Now().UnixNano())
	for len(batch) > 0 {
		n, size := 0, 0
		for n < len(batch) && (n == 0 || size+len(batch[n].JSON) <= otlpRequestBytes) {
			size += len(batch[n].JSON)
			n++
		}
		if err := s.export(ctx, batch[:n], now); err != nil {
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// export sends records in one request.
func (s *OTLP) export(ctx context.Context, records []Record, now uint64) error {
	lrs := make([]*otlplogs.LogRecord, len(records))
	for i, r := range records {
		lrs[i] = logRecord(r, now)
	}
	resp, err := s.client.Export(ctx, &logsv1.ExportLogsServiceRequest{
		ResourceLogs: []*otlplogs.ResourceLogs{{
			Resource:  s.res,
			ScopeLogs: []*otlplogs.ScopeLogs{{Scope: &commonv1.InstrumentationScope{Name: otlpScope}, LogRecords: lrs}},
		}},
	})
	if err != nil {
		return fmt.Errorf("decision log otlp: export: %w", err)
	}
	if ps := resp.GetPartialSuccess(); ps.GetRejectedLogRecords() != 0 {
		return fmt.Errorf("decision log otlp: the collector rejected %d of %d log records: %s",
			ps.GetRejectedLogRecords(), len(records), ps.GetErrorMessage())
	}
	return nil
}

// Close closes the connection.
func (s *OTLP) Close() error {
	if err := s.conn.Close(); err != nil {
		return fmt.Errorf("decision log otlp: %w", err)
	}
	return nil
}

// recordFields are the members of a record's JSON the log record
// carries apart from its body.
type recordFields struct {
	Time    time.Time `json:"time"`
	TraceID string    `json:"trace_id"`
	SpanID  string    `json:"span_id"`
	Allow   *bool     `json:"allow"`
	Reason  string    `json:"reason"`
}

// logRecord is r as an OTLP log record observed at now. A record whose
// JSON cannot be read still goes, with its body, id and tenant.
func logRecord(r Record, now uint64) *otlplogs.LogRecord {
	lr := &otlplogs.LogRecord{
		ObservedTimeUnixNano: now,
		SeverityNumber:       otlplogs.SeverityNumber_SEVERITY_NUMBER_INFO,
		SeverityText:         "INFO",
		EventName:            "svc.decision",
		Body:                 &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: string(r.JSON)}},
		Attributes:           []*commonv1.KeyValue{strAttr("svc.decision_id", r.DecisionID), strAttr("svc.tenant", r.Tenant)},
	}
	var f recordFields
	if json.Unmarshal(r.JSON, &f) != nil {
		return lr
	}
	if !f.Time.IsZero() && f.Time.UnixNano() > 0 {
		lr.TimeUnixNano = uint64(f.Time.UnixNano())
	}
	if f.Allow != nil {
		decision := "deny"
		if *f.Allow {
			decision = "allow"
		}
		lr.Attributes = append(lr.Attributes, strAttr("svc.decision", decision))
	}
	if f.Reason != "" {
		lr.Attributes = append(lr.Attributes, strAttr("svc.reason", f.Reason))
	}
	if id := hexID(f.TraceID, 16); id != nil {
		lr.TraceId = id
		lr.SpanId = hexID(f.SpanID, 8)
	}
	return lr
}

// hexID is the n bytes of the hex id s; nil when s is not such an id or
// is all zeros (no trace).
func hexID(s string, n int) []byte {
	if len(s) != 2*n {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil
	}
	for _, c := range b {
		if c != 0 {
			return b
		}
	}
	return nil
}

func strAttr(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}
