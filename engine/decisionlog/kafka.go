package decisionlog

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	opts   KafkaOptions
	clOpts []kgo.Opt
	cl     *kgo.Client
	// batchBytes is the topic's max.message.bytes as the brokers last
	// said (at most kafkaBatchMaxBytes), 0 until they did; known says
	// whether they answered at all (a refusal to describe the topic
	// leaves the default). Send reads them before it produces.
	batchBytes atomic.Int32
	known      bool
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
	s := &Kafka{opts: opts}
	s.clOpts = []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("svc-sidecar-decision-log"),
		kgo.DefaultProduceTopic(opts.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(opts.Timeout),
		kgo.AllowIdempotentProduceCancellation(),
		// Batches as large as the topic takes: franz-go reads this
		// once per partition, when it first produces to it, which
		// Send does only once the topic's bound was asked for.
		kgo.ProducerBatchMaxBytesFn(func(string) int32 { return s.batchMax() }),
	}
	if secure {
		s.clOpts = append(s.clOpts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, RootCAs: opts.RootCAs}))
	}
	if mech != nil {
		s.clOpts = append(s.clOpts, kgo.SASL(mech))
	}
	if s.cl, err = kgo.NewClient(s.clOpts...); err != nil {
		return nil, fmt.Errorf("decision log kafka: %w", err)
	}
	return s, nil
}

// batchMax is the largest record batch the topic takes, as far as known.
func (s *Kafka) batchMax() int32 {
	if n := s.batchBytes.Load(); n > 0 {
		return n
	}
	return kafkaBatchMaxBytes
}

// readBound asks the brokers for the topic's max.message.bytes, the
// bound of a record batch: a topic that takes less than the producer's
// default batch refuses larger batches (MESSAGE_TOO_LARGE) each time they
// are sent, and every record behind them would wait. A broker's refusal
// to describe the topic (no DescribeConfigs right, a topic created on
// first use) leaves the default; an unreachable one is an error, and
// Send produces nothing until it has an answer.
func (s *Kafka) readBound(ctx context.Context) error {
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, s.opts.Topic
	res.ConfigNames = []string{"max.message.bytes"}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return fmt.Errorf("decision log kafka: topic %s: reading its max.message.bytes: %w", s.opts.Topic, err)
	}
	s.known = true
	for _, r := range resp.Resources {
		if kerr.ErrorForCode(r.ErrorCode) != nil {
			continue
		}
		for _, c := range r.Configs {
			if c.Name != "max.message.bytes" || c.Value == nil {
				continue
			}
			if n, err := strconv.ParseInt(*c.Value, 10, 32); err == nil && n >= kafkaMinBatchBytes {
				s.batchBytes.Store(int32(min(n, kafkaBatchMaxBytes)))
			}
		}
	}
	return nil
}

// kafkaBatchMaxBytes bounds a record batch, as the producer's default
// and the brokers' default max.message.bytes do.
const kafkaBatchMaxBytes = 1_000_012

// kafkaMinBatchBytes is the smallest batch bound franz-go takes.
const kafkaMinBatchBytes = 512

// kafkaRecordRoom is what a record's batch framing, key (the tenant) and
// decision-id header may take of a batch: 4 KiB, or a quarter of a
// smaller batch.
func kafkaRecordRoom(batch int) int { return min(4<<10, batch/4) }

// MaxRecordBytes is the largest record one produce takes: a larger one
// is failed each time, by the producer or by the brokers. It is the
// topic's max.message.bytes once read (at most the producer's default
// batch of 1,000,012 bytes), less room for the record's framing.
func (s *Kafka) MaxRecordBytes() int {
	n := int(s.batchMax())
	return n - kafkaRecordRoom(n)
}

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
//
// A batch the brokers refuse for its size (the topic's max.message.bytes
// lowered since it was read) has the bound read again and, when it
// changed, the producer made anew, since franz-go keeps a partition's
// batch bound for good.
func (s *Kafka) Send(ctx context.Context, batch []Record) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	if !s.known {
		if err := s.readBound(ctx); err != nil {
			return err
		}
	}
	err := s.produce(ctx, batch)
	if errors.Is(err, kerr.MessageTooLarge) {
		s.renew(ctx)
	}
	return err
}

// renew reads the topic's bound again and, when it changed, replaces
// the producer; nothing is in flight (Send waits for every record).
func (s *Kafka) renew(ctx context.Context) {
	before := s.batchMax()
	if s.readBound(ctx) != nil || s.batchMax() == before {
		return
	}
	cl, err := kgo.NewClient(s.clOpts...)
	if err != nil {
		return
	}
	s.cl.Close()
	s.cl = cl
}

// produce produces the batch and waits for every acknowledgement.
func (s *Kafka) produce(ctx context.Context, batch []Record) error {
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
