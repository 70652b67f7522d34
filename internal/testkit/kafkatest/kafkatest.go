// Package kafkatest runs an in-process Kafka-protocol broker (franz-go's
// kfake) for tests, with a switch that makes it refuse produce requests
// and a reader of everything a topic holds.
package kafkatest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/decisionlog"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Partitions is the number of partitions of the topics Start creates.
const Partitions = 3

// Cluster is a one-broker kfake cluster on loopback.
type Cluster struct {
	*kfake.Cluster
	down    atomic.Bool
	control sync.Once
	// scheme is the URL's; client the options Records connects with.
	scheme string
	client []kgo.Opt
}

// Start runs a cluster holding topics (Partitions partitions each) and
// closes it when tb ends.
func Start(tb testing.TB, topics ...string) *Cluster {
	tb.Helper()
	return StartSecure(tb, Security{}, topics...)
}

// Security is how a cluster's clients connect: over TLS when TLS is set,
// authenticated with SASL when Mechanism is (a superuser User of
// Password, by PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512).
type Security struct {
	TLS                       *testkit.Issued
	RootCAs                   *x509.CertPool
	Mechanism, User, Password string
}

// StartTLS is StartSecure over TLS, the broker's certificate issued by a
// fresh authority (returned too, for clients to trust), with SASL by
// mechanism for the superuser user of password.
func StartTLS(tb testing.TB, mechanism, user, password string, topics ...string) (*Cluster, *testkit.CA) {
	tb.Helper()
	ca := testkit.NewCA(tb, "kafka-ca")
	server := ca.Server(tb)
	sec := Security{TLS: &server, RootCAs: ca.Pool(), Mechanism: mechanism, User: user, Password: password}
	return StartSecure(tb, sec, topics...), ca
}

// StartSecure is Start with sec. Its URL is kafkas:// over TLS.
func StartSecure(tb testing.TB, sec Security, topics ...string) *Cluster {
	tb.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(Partitions, topics...)}
	c := &Cluster{scheme: "kafka"}
	if sec.TLS != nil {
		cert, err := tls.X509KeyPair(sec.TLS.CertPEM, sec.TLS.KeyPEM)
		if err != nil {
			tb.Fatalf("kafkatest: %v", err)
		}
		opts = append(opts, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
		c.scheme = "kafkas"
		c.client = append(c.client, kgo.DialTLSConfig(&tls.Config{RootCAs: sec.RootCAs, MinVersion: tls.VersionTLS12}))
	}
	if sec.Mechanism != "" {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(sec.Mechanism, sec.User, sec.Password))
		m, err := decisionlog.KafkaSASL{Mechanism: sec.Mechanism, User: sec.User, Password: sec.Password}.SASLMechanism()
		if err != nil {
			tb.Fatalf("kafkatest: %v", err)
		}
		c.client = append(c.client, kgo.SASL(m))
	}
	kc, err := kfake.NewCluster(opts...)
	if err != nil {
		tb.Fatalf("kafkatest: %v", err)
	}
	tb.Cleanup(kc.Close)
	c.Cluster = kc
	return c
}

// URL is the cluster's kafka://host:port URL (kafkas:// over TLS).
func (c *Cluster) URL() string { return c.scheme + "://" + strings.Join(c.ListenAddrs(), ",") }

// SetDown makes the broker answer every produce request with a
// retriable error (NOT_ENOUGH_REPLICAS: nothing written) while down is
// true, as a cluster that lost its replicas does.
func (c *Cluster) SetDown(down bool) {
	c.control.Do(func() {
		c.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if !c.down.Load() {
				return nil, nil, false
			}
			preq := req.(*kmsg.ProduceRequest)
			resp := preq.ResponseKind().(*kmsg.ProduceResponse)
			for _, rt := range preq.Topics {
				st := kmsg.NewProduceResponseTopic()
				st.Topic, st.TopicID = rt.Topic, rt.TopicID
				for _, rp := range rt.Partitions {
					sp := kmsg.NewProduceResponseTopicPartition()
					sp.Partition = rp.Partition
					sp.ErrorCode = kerr.NotEnoughReplicas.Code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
	})
	c.down.Store(down)
}

// Records returns every record topic holds, partition by partition in
// offset order.
func (c *Cluster) Records(tb testing.TB, topic string) []*kgo.Record {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := c.newClient(tb)
	defer cl.Close()

	// The end of each partition, then everything before it.
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(Partitions) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		tb.Fatalf("kafkatest: list offsets of %s: %v", topic, err)
	}
	end := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				tb.Fatalf("kafkatest: list offsets of %s/%d: %v", topic, p.Partition, err)
			}
			if p.Offset > 0 {
				end[p.Partition] = p.Offset
			}
		}
	}
	offsets := map[int32]kgo.Offset{}
	for p := range end {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	if len(offsets) == 0 {
		return nil
	}
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets})
	byPartition := map[int32][]*kgo.Record{}
	for len(end) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			tb.Fatalf("kafkatest: reading %s: %v (partitions left to their end: %v)", topic, ctx.Err(), end)
		}
		fs.EachError(func(t string, p int32, err error) { tb.Fatalf("kafkatest: reading %s/%d: %v", t, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			byPartition[r.Partition] = append(byPartition[r.Partition], r)
			if e, ok := end[r.Partition]; ok && r.Offset+1 >= e {
				delete(end, r.Partition)
			}
		})
	}
	var all []*kgo.Record
	for p := range int32(Partitions) {
		all = append(all, byPartition[p]...)
	}
	return all
}

// Header is the value of a record's header key, "" without it.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// SetTopicConfig sets the topic's configuration name to value, as
// kafka-configs.sh --alter does (for instance max.message.bytes).
func (c *Cluster) SetTopicConfig(tb testing.TB, topic, name, value string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := c.newClient(tb)
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value, cfg.Op = name, &value, kmsg.IncrementalAlterConfigOpSet
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		tb.Fatalf("kafkatest: set %s of %s: %v", name, topic, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			tb.Fatalf("kafkatest: set %s of %s: %v", name, topic, err)
		}
	}
}

// newClient is a client of the cluster, connecting as its clients do.
func (c *Cluster) newClient(tb testing.TB) *kgo.Client {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, c.client...)...)
	if err != nil {
		tb.Fatalf("kafkatest: %v", err)
	}
	return cl
}
