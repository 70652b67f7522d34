package decisionlog_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/decisionlog"
	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/kafkatest"
)

// runLogger runs a Logger with sink on spoolDir until the test ends or
// stop is called.
func runLogger(t *testing.T, sink decisionlog.Sink, spoolDir string) (l *decisionlog.Logger, stop func()) {
	t.Helper()
	return runLoggerWith(t, sink, decisionlog.Options{
		Spool:         spool.Options{Dir: spoolDir, SegmentBytes: 64 << 10},
		FlushInterval: 20 * time.Millisecond, FsyncInterval: 20 * time.Millisecond, BatchMaxRecords: 100,
	})
}

// runLoggerWith is runLogger with opts.
func runLoggerWith(t *testing.T, sink decisionlog.Sink, opts decisionlog.Options) (l *decisionlog.Logger, stop func()) {
	t.Helper()
	l, err := decisionlog.New(opts, sink)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("logger run: %v", err)
		}
	}
	t.Cleanup(stop)
	return l, stop
}

// Each record is a Kafka message keyed by its tenant, with the record's
// JSON as its value and its decision id in the decision-id header.
func TestKafkaRecordShape(t *testing.T) {
	kc := kafkatest.Start(t, "decisions")
	sink, err := decisionlog.NewKafka(decisionlog.KafkaOptions{URL: kc.URL(), Topic: "decisions", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	batch := []decisionlog.Record{
		{DecisionID: "dec-1", Tenant: "acme", JSON: []byte(`{"decision_id":"dec-1","tenant":"acme"}`)},
		{DecisionID: "dec-2", Tenant: "globex", JSON: []byte(`{"decision_id":"dec-2","tenant":"globex"}`)},
	}
	if err := sink.Send(context.Background(), batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
	recs := kc.Records(t, "decisions")
	if len(recs) != 2 {
		t.Fatalf("topic holds %d records, want 2", len(recs))
	}
	got := map[string]string{}
	for _, r := range recs {
		id := kafkatest.Header(r, decisionlog.DecisionIDHeader)
		got[id] = string(r.Key) + " " + string(r.Value)
	}
	for _, b := range batch {
		if want := b.Tenant + " " + string(b.JSON); got[b.DecisionID] != want {
			t.Errorf("record %s: key and value %q, want %q", b.DecisionID, got[b.DecisionID], want)
		}
	}
}

// A topic that does not exist (and that the broker does not create)
// fails the batch with an error naming the topic.
func TestKafkaMissingTopic(t *testing.T) {
	kc := kafkatest.Start(t, "decisions")
	sink, err := decisionlog.NewKafka(decisionlog.KafkaOptions{URL: kc.URL(), Topic: "nowhere", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	err = sink.Send(context.Background(), []decisionlog.Record{{DecisionID: "dec-1", Tenant: "acme", JSON: []byte(`{}`)}})
	if err == nil || !strings.Contains(err.Error(), "decision log kafka: topic nowhere") || !strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("Send to a missing topic: %v, want an error naming it", err)
	}
}

// MaxRecordBytes is a record the producer takes, with its key and
// header; a record past the batch bound is failed by it each time.
func TestKafkaRecordBound(t *testing.T) {
	kc := kafkatest.Start(t, "decisions")
	sink, err := decisionlog.NewKafka(decisionlog.KafkaOptions{URL: kc.URL(), Topic: "decisions", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	n := sink.MaxRecordBytes()
	record := func(size int) []decisionlog.Record {
		id := strings.Repeat("d", 64)
		return []decisionlog.Record{{DecisionID: id, Tenant: strings.Repeat("t", 256),
			JSON: []byte(`{"decision_id":"` + id + `","x":"` + strings.Repeat("a", size-len(id)-25) + `"}`)}}
	}
	if err := sink.Send(context.Background(), record(n)); err != nil {
		t.Fatalf("Send of a %d-byte record: %v", n, err)
	}
	if err := sink.Send(context.Background(), record(n+5<<10)); err == nil || !strings.Contains(err.Error(), "MESSAGE_TOO_LARGE") {
		t.Fatalf("Send of a record past the bound: %v, want MESSAGE_TOO_LARGE", err)
	}
}

func TestKafkaBadURL(t *testing.T) {
	for _, u := range []string{"", "nats://127.0.0.1:4222", "kafka://", "kafka://,"} {
		if _, err := decisionlog.NewKafka(decisionlog.KafkaOptions{URL: u}); err == nil || !strings.HasPrefix(err.Error(), "decision log kafka:") {
			t.Errorf("NewKafka(%q) = %v, want an error", u, err)
		}
	}
}

// Through an outage of the broker the records wait in the spool and
// are produced once it is back: every decision id at least once.
func TestKafkaOutage(t *testing.T) {
	kc := kafkatest.Start(t, "svc-decisions")
	sink, err := decisionlog.NewKafka(decisionlog.KafkaOptions{URL: kc.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, stop := runLogger(t, sink, t.TempDir())
	logN(t, l, 0, 300)
	testkit.Eventually(t, "300 records shipped", func() bool { return l.Stats().Unsent == 0 })

	kc.SetDown(true)
	logN(t, l, 300, 200)
	testkit.Eventually(t, "the outage seen", func() bool { st := l.Stats(); return !st.Connected && st.Retries > 0 })
	if st := l.Stats(); st.Unsent != 200 || !strings.Contains(st.LastError, "decision log kafka:") {
		t.Fatalf("during the outage: %+v, want 200 unsent and the sink's error", st)
	}
	kc.SetDown(false)
	testkit.Eventually(t, "the records of the outage shipped", func() bool { return l.Stats().Unsent == 0 })
	if st := l.Stats(); !st.Connected || st.Shipped < 500 {
		t.Fatalf("after the outage: %+v", st)
	}
	stop()

	ids := map[string]int{}
	for _, r := range kc.Records(t, "svc-decisions") {
		ids[kafkatest.Header(r, decisionlog.DecisionIDHeader)]++
		if string(r.Key) != "acme" {
			t.Fatalf("record key %q, want the tenant acme", r.Key)
		}
	}
	for i := range 500 {
		if id := fmt.Sprintf("dec-%06d", i); ids[id] == 0 {
			t.Fatalf("decision %s is not in the topic", id)
		}
	}
}

// A broker gone altogether fails the batch at the timeout rather than
// holding Send until it is back.
func TestKafkaBrokerGone(t *testing.T) {
	kc := kafkatest.Start(t, "svc-decisions")
	sink, err := decisionlog.NewKafka(decisionlog.KafkaOptions{URL: kc.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	rec := []decisionlog.Record{{DecisionID: "dec-1", Tenant: "acme", JSON: []byte(`{}`)}}
	if err := sink.Send(context.Background(), rec); err != nil {
		t.Fatalf("Send: %v", err)
	}
	kc.Close()
	start := time.Now()
	err = sink.Send(context.Background(), rec)
	if err == nil || !strings.HasPrefix(err.Error(), "decision log kafka:") {
		t.Fatalf("Send to a closed cluster: %v, want an error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Send to a closed cluster took %s, want about the 1s timeout", d)
	}
}

// A kafkas:// sink reaches brokers over TLS, verified against RootCAs,
// and authenticates with SASL: with the right password the records
// arrive; with a wrong one, or without the brokers' authority, the batch
// fails and nothing is written.
func TestKafkaTLSAndSASL(t *testing.T) {
	for _, mech := range []string{decisionlog.SASLPlain, decisionlog.SASLSCRAMSHA256, decisionlog.SASLSCRAMSHA512} {
		t.Run(mech, func(t *testing.T) {
			kc, ca := kafkatest.StartTLS(t, mech, "svc", "s3cret", "decisions")
			roots := ca.Pool()
			if !strings.HasPrefix(kc.URL(), "kafkas://") {
				t.Fatalf("URL %s", kc.URL())
			}
			send := func(opts decisionlog.KafkaOptions, id string) error {
				opts.URL, opts.Topic, opts.Timeout = kc.URL(), "decisions", 3*time.Second
				sink, err := decisionlog.NewKafka(opts)
				if err != nil {
					t.Fatal(err)
				}
				defer sink.Close()
				return sink.Send(context.Background(), []decisionlog.Record{{DecisionID: id, Tenant: "acme", JSON: []byte(`{"decision_id":"` + id + `"}`)}})
			}
			if err := send(decisionlog.KafkaOptions{RootCAs: roots, SASL: decisionlog.KafkaSASL{Mechanism: mech, User: "svc", Password: "s3cret"}}, "dec-ok"); err != nil {
				t.Fatalf("with TLS and the right credentials: %v", err)
			}
			if err := send(decisionlog.KafkaOptions{RootCAs: roots, SASL: decisionlog.KafkaSASL{Mechanism: mech, User: "svc", Password: "wrong"}}, "dec-badpass"); err == nil {
				t.Fatal("a wrong password was accepted")
			} else if strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows a password: %v", err)
			}
			if err := send(decisionlog.KafkaOptions{SASL: decisionlog.KafkaSASL{Mechanism: mech, User: "svc", Password: "s3cret"}}, "dec-noca"); err == nil {
				t.Fatal("a broker whose certificate no trusted authority signed was accepted")
			}
			recs := kc.Records(t, "decisions")
			if len(recs) != 1 || kafkatest.Header(recs[0], decisionlog.DecisionIDHeader) != "dec-ok" {
				t.Fatalf("topic holds %d records, want only dec-ok", len(recs))
			}
		})
	}
}

func TestKafkaUnknownSASLMechanism(t *testing.T) {
	_, err := decisionlog.NewKafka(decisionlog.KafkaOptions{URL: "kafka://127.0.0.1:9092", SASL: decisionlog.KafkaSASL{Mechanism: "GSSAPI"}})
	if err == nil || !strings.Contains(err.Error(), "GSSAPI") {
		t.Fatalf("NewKafka with GSSAPI: %v, want an error naming it", err)
	}
}

// A topic whose max.message.bytes is below the producer's default batch
// bound: batches are sized to the topic's bound, read from the brokers,
// so they are not refused (MESSAGE_TOO_LARGE) each time they are sent
// with every record behind them waiting; a record over it goes without
// its input.
func TestKafkaTopicMaxMessageBytes(t *testing.T) {
	const topic, bound = "decisions", 32 << 10
	kc := kafkatest.Start(t, topic)
	kc.SetTopicConfig(t, topic, "max.message.bytes", fmt.Sprint(bound))
	sink, err := decisionlog.NewKafka(decisionlog.KafkaOptions{URL: kc.URL(), Topic: topic, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, stop := runLoggerWith(t, sink, decisionlog.Options{
		Spool:         spool.Options{Dir: t.TempDir(), SegmentBytes: 1 << 20},
		FlushInterval: 20 * time.Millisecond, FsyncInterval: 20 * time.Millisecond, BatchMaxRecords: 100,
	})
	// Random hex: the producer's compression does not bring a batch
	// under the bound.
	noise := func(n int) string {
		b := make([]byte, n/2)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	big := decisionlog.Record{DecisionID: "dec-big", Tenant: "acme",
		JSON: []byte(`{"decision_id":"dec-big","input":{"x":"` + noise(2*bound) + `"}}`)}
	if err := l.Log(big); err != nil {
		t.Fatalf("Log of a record over the topic's bound before it is known: %v", err)
	}
	const n = 300
	for i := range n {
		id := fmt.Sprintf("dec-%06d", i)
		if err := l.Log(decisionlog.Record{DecisionID: id, Tenant: "acme",
			JSON: []byte(`{"decision_id":"` + id + `","x":"` + noise(1500) + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, "every record shipped", func() bool { return l.Stats().Unsent == 0 })
	if got := sink.MaxRecordBytes(); got <= 0 || got >= bound {
		t.Errorf("MaxRecordBytes = %d, want under the topic's %d", got, bound)
	}
	// The topic's bound lowered while the sidecar runs: the batch
	// refused for it is sent again in batches of the new bound.
	kc.SetTopicConfig(t, topic, "max.message.bytes", fmt.Sprint(bound/2))
	const more = 100
	for i := n; i < n+more; i++ {
		id := fmt.Sprintf("dec-%06d", i)
		if err := l.Log(decisionlog.Record{DecisionID: id, Tenant: "acme",
			JSON: []byte(`{"decision_id":"` + id + `","x":"` + noise(1500) + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, "the records after the change shipped", func() bool { return l.Stats().Unsent == 0 })
	if got := sink.MaxRecordBytes(); got >= bound/2 {
		t.Errorf("MaxRecordBytes = %d after the change, want under %d", got, bound/2)
	}
	stop()
	ids := map[string]bool{}
	for _, r := range kc.Records(t, topic) {
		id := kafkatest.Header(r, decisionlog.DecisionIDHeader)
		ids[id] = true
		if id == big.DecisionID && strings.Contains(string(r.Value), `"input"`) {
			t.Errorf("the record over the bound was produced with its input (%d bytes)", len(r.Value))
		}
	}
	if len(ids) != n+more+1 || !ids[big.DecisionID] {
		t.Fatalf("topic holds %d decision ids (dec-big: %v), want %d", len(ids), ids[big.DecisionID], n+more+1)
	}
}
