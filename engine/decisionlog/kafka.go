package decisionlog

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KafkaOptions configure the Kafka sink.
type KafkaOptions struct {
	// URL names the seed brokers: kafka://host:port (several
	// comma-separated, kafka://b1:9092,b2:9092).
	URL string
	// Topic is where records are produced (default svc-decisions). It
	// must exist unless the brokers create topics on first use.
	Topic string
	// Timeout bounds one batch's acknowledgements (default 10s).
	Timeout time.Duration
	// RootCAs, when set, are the authorities a kafkas:// broker's
	// certificate is verified against instead of the system's.
	RootCAs *x509.CertPool
	// SASL authenticates the producer to the brokers; zero for none.
	SASL KafkaSASL
}

// KafkaSASL is a SASL mechanism and its credentials.
type KafkaSASL struct {
	// Mechanism is "PLAIN", "SCRAM-SHA-256" or "SCRAM-SHA-512"; "" for
	// no authentication.
	Mechanism string
	User      string
	Password  string
}

// Kafka SASL mechanisms.
const (
	SASLPlain       = "PLAIN"
	SASLSCRAMSHA256 = "SCRAM-SHA-256"
	SASLSCRAMSHA512 = "SCRAM-SHA-512"
)

// SASLMechanism is franz-go's SASL mechanism of s, nil for none.
func (s KafkaSASL) SASLMechanism() (sasl.Mechanism, error) {
	switch s.Mechanism {
	case "":
		return nil, nil
	case SASLPlain:
		return plain.Auth{User: s.User, Pass: s.Password}.AsMechanism(), nil
	case SASLSCRAMSHA256:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha256Mechanism(), nil
	case SASLSCRAMSHA512:
		return scram.Auth{User: s.User, Pass: s.Password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("decision log kafka: SASL mechanism %q is not one of %s, %s or %s", s.Mechanism, SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512)
}

// DecisionIDHeader is the header of each Kafka record that carries its
// decision id, the key by which consumers drop a record sent twice.
const DecisionIDHeader = "decision-id"

// Kafka is the Kafka sink: each record a message keyed by its tenant,
// its value the record's JSON and its decision id in the decision-id
// header, produced by an idempotent producer with acks from all in-sync
// replicas.
type Kafka struct {
	opts KafkaOptions
	cl   *kgo.Client
}

// NewKafka makes the producer of opts.URL; it connects on the first
// batch and reconnects on its own, and batches fail meanwhile (the
// spool keeps them).
func NewKafka(opts KafkaOptions) (*Kafka, error) {
	if opts.Topic == "" {
		opts.Topic = "svc-decisions"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	seeds, secure, err := kafkaSeeds(opts.URL)
	if err != nil {
		return nil, err
	}
	mech, err := opts.SASL.SASLMechanism()
	if err != nil {
		return nil, err
	}
	// The producer is idempotent (franz-go's default, kept): a request
	// the client retries on its own is written once. Records in flight
	// may still be failed, at the timeout or when the logger stops:
	// otherwise records sent to a broker that vanished mid-request stay
	// in the client until it is back, and every later batch waits
	// behind them. A batch so failed is sent again by the logger and
	// may be written twice, as the spool's re-sending after a crash may
	// anyway: consumers drop duplicates by the decision-id header.
	clOpts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("svc-sidecar-decision-log"),
		kgo.DefaultProduceTopic(opts.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(opts.Timeout),
		kgo.AllowIdempotentProduceCancellation(),
		kgo.ProducerBatchMaxBytes(kafkaBatchMaxBytes),
	}
	if secure {
		clOpts = append(clOpts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: opts.RootCAs}))
	}
	if mech != nil {
		clOpts = append(clOpts, kgo.SASL(mech))
	}
	cl, err := kgo.NewClient(clOpts...)
	if err != nil {
		return nil, fmt.Errorf("decision log kafka: %w", err)
	}
	return &Kafka{opts: opts, cl: cl}, nil
}

// kafkaBatchMaxBytes bounds a record batch, as the producer's default
// and the brokers' default max.message.bytes do.
const kafkaBatchMaxBytes = 1_000_012

// kafkaRecordRoom is what a record's batch framing, key (the tenant) and
// decision-id header may take of kafkaBatchMaxBytes.
const kafkaRecordRoom = 4 << 10

// MaxRecordBytes is the largest record one produce takes: a larger one
// is failed by the producer each time. A topic whose brokers take less
// (a lower max.message.bytes) refuses records this lets through; set it
// to at least 1 MB.
func (s *Kafka) MaxRecordBytes() int { return kafkaBatchMaxBytes - kafkaRecordRoom }

// kafkaSeeds are the host:port seed brokers of a kafka:// URL, or of a
// kafkas:// URL, whose brokers are reached over TLS (secure).
func kafkaSeeds(raw string) (seeds []string, secure bool, err error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "kafka" && u.Scheme != "kafkas") || u.Host == "" {
		return nil, false, fmt.Errorf("decision log kafka: url must be kafka://host:port[,host:port...] or kafkas:// (TLS), got %q", redact(raw))
	}
	for _, h := range strings.Split(u.Host, ",") {
		if h = strings.TrimSpace(h); h != "" {
			seeds = append(seeds, h)
		}
	}
	if len(seeds) == 0 {
		return nil, false, fmt.Errorf("decision log kafka: url %q names no broker", redact(raw))
	}
	return seeds, u.Scheme == "kafkas", nil
}

// redact is u without userinfo or query, for an error message.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable)"
	}
	p.User, p.RawQuery = nil, ""
	return p.String()
}

// Name is "kafka".
func (s *Kafka) Name() string { return "kafka" }

// Send produces the batch and waits for every produce acknowledgement;
// any record failed fails the batch, and so does the timeout: records
// then still buffered fail on their own soon after, their contexts
// done.
func (s *Kafka) Send(ctx context.Context, batch []Record) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed int
		first  error
	)
	wg.Add(len(batch))
	for _, r := range batch {
		rec := &kgo.Record{
			Key:     []byte(r.Tenant),
			Value:   r.JSON,
			Headers: []kgo.RecordHeader{{Key: DecisionIDHeader, Value: []byte(r.DecisionID)}},
		}
		s.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				failed++
				mu.Unlock()
			}
			wg.Done()
		})
	}
	acked := make(chan struct{})
	go func() { wg.Wait(); close(acked) }()
	select {
	case <-acked:
	case <-ctx.Done():
		return fmt.Errorf("decision log kafka: topic %s: records unacknowledged after %s: %w", s.opts.Topic, s.opts.Timeout, ctx.Err())
	}
	if first != nil {
		return fmt.Errorf("decision log kafka: topic %s: %d of %d records failed: %w", s.opts.Topic, failed, len(batch), first)
	}
	return nil
}

// Close closes the producer; Send is not called meanwhile, so nothing
// is buffered.
func (s *Kafka) Close() error {
	s.cl.Close()
	return nil
}
