package decisionlog_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc-dev/svc/engine/decisionlog"
	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/natstest"
)

// startLogger runs a Logger with a NATS sink on spoolDir until the test
// ends or stop is called.
func startLogger(t *testing.T, url, spoolDir string) (l *decisionlog.Logger, stop func()) {
	t.Helper()
	sink, err := decisionlog.NewNATS(decisionlog.NATSOptions{URL: url, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return runLogger(t, sink, spoolDir)
}

func logN(t *testing.T, l *decisionlog.Logger, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("dec-%06d", i)
		if err := l.Log(decisionlog.Record{DecisionID: id, Tenant: "acme", JSON: []byte(`{"decision_id":"` + id + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
}

// streamIDs returns how many messages the stream holds and the decision
// ids among them, each with its count.
func streamIDs(t *testing.T, srv *natstest.Server) (int, map[string]int) {
	t.Helper()
	return srv.MsgIDs(t, "SVC_DECISIONS")
}

func wantExactlyOnce(t *testing.T, srv *natstest.Server, n int) {
	t.Helper()
	msgs, ids := streamIDs(t, srv)
	if msgs != n || len(ids) != n {
		t.Fatalf("stream holds %d messages of %d decision ids, want %d of %d", msgs, len(ids), n, n)
	}
	for i := 0; i < n; i++ {
		if c := ids[fmt.Sprintf("dec-%06d", i)]; c != 1 {
			t.Fatalf("decision dec-%06d is in the stream %d times", i, c)
		}
	}
}

// Records reach JetStream exactly once: through an outage of the server
// (they wait in the spool), and when a restarted process sends again
// what its predecessor shipped but had not yet acknowledged on disk.
func TestNATSExactlyOnce(t *testing.T) {
	srv := natstest.Start(t)
	dir := t.TempDir()
	l, stop := startLogger(t, srv.URL(), dir)
	logN(t, l, 0, 1000)
	testkit.Eventually(t, "1000 records shipped", func() bool { return l.Stats().Unsent == 0 })

	srv.Kill()
	logN(t, l, 1000, 500)
	testkit.Eventually(t, "the outage seen", func() bool { st := l.Stats(); return !st.Connected && st.Retries > 0 })
	if st := l.Stats(); st.Unsent != 500 || st.OldestUnsentAge <= 0 || st.LastError == "" {
		t.Fatalf("during the outage: %+v, want 500 unsent with an age and an error", st)
	}
	srv.Restart()
	testkit.Eventually(t, "the records of the outage shipped", func() bool { return l.Stats().Unsent == 0 })
	if st := l.Stats(); !st.Connected || st.Shipped < 1500 {
		t.Fatalf("after the outage: %+v", st)
	}
	stop()
	wantExactlyOnce(t, srv, 1500)

	// The cursor file lost (a crash before it reached the disk): the
	// next process sends every record still in the spool again, and the
	// server drops them by their decision ids.
	cursors, _ := filepath.Glob(filepath.Join(dir, "p-*", "cursor"))
	if len(cursors) != 1 {
		t.Fatalf("cursor files %q, want the one of the stopped process", cursors)
	}
	if err := os.Remove(cursors[0]); err != nil {
		t.Fatal(err)
	}
	l, stop = startLogger(t, srv.URL(), dir)
	testkit.Eventually(t, "the records resent", func() bool { return l.Stats().Shipped > 0 && l.Stats().Unsent == 0 })
	logN(t, l, 1500, 10)
	testkit.Eventually(t, "new records shipped", func() bool { return l.Stats().Unsent == 0 })
	if dirs, _ := filepath.Glob(filepath.Join(dir, "p-*")); len(dirs) != 1 {
		t.Errorf("process directories %q once the previous one was shipped, want this process's alone", dirs)
	}
	stop()
	wantExactlyOnce(t, srv, 1510)
}

// Two processes on one spool root (a sidecar handing over to its next
// image) each spool apart; what the first leaves unsent when it stops
// is shipped by the next process to start, exactly once.
func TestNATSHandover(t *testing.T) {
	srv := natstest.Start(t)
	dir := t.TempDir()
	first, stopFirst := startLogger(t, srv.URL(), dir)
	second, _ := startLogger(t, srv.URL(), dir)
	logN(t, first, 0, 300)
	logN(t, second, 300, 300)
	testkit.Eventually(t, "both shipped", func() bool { return first.Stats().Unsent == 0 && second.Stats().Unsent == 0 })
	srv.Kill()
	logN(t, first, 600, 200) // left unsent: the sink is down
	stopFirst()
	srv.Restart()
	third, _ := startLogger(t, srv.URL(), dir)
	testkit.Eventually(t, "the first process's records shipped by the third", func() bool {
		st := third.Stats()
		return st.Shipped >= 200 && st.Unsent == 0
	})
	testkit.Eventually(t, "the second's shipping again", func() bool { return second.Stats().Unsent == 0 })
	wantExactlyOnce(t, srv, 800)
}

// A batch is acknowledged only by the sink's stream: with the stream
// deleted it fails (no responders), and with another stream made on the
// subject meanwhile it fails too, though that stream took the records,
// and the sink says why it cannot set its stream up again; once the
// subject is free, the sink makes its stream again and ships there.
func TestNATSStreamReplaced(t *testing.T) {
	srv := natstest.Start(t)
	sink, err := decisionlog.NewNATS(decisionlog.NATSOptions{URL: srv.URL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	batch := func(from int) []decisionlog.Record {
		var b []decisionlog.Record
		for i := from; i < from+10; i++ {
			id := fmt.Sprintf("dec-%06d", i)
			b = append(b, decisionlog.Record{DecisionID: id, Tenant: "acme", JSON: []byte(`{"decision_id":"` + id + `"}`)})
		}
		return b
	}
	ctx := t.Context()
	if err := sink.Send(ctx, batch(0)); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	if err := js.DeleteStream(ctx, "SVC_DECISIONS"); err != nil {
		t.Fatal(err)
	}
	if err := sink.Send(ctx, batch(10)); err == nil || !strings.Contains(err.Error(), "no responders") {
		t.Fatalf("send with the stream deleted: %v, want no responders", err)
	}
	if err := sink.Send(ctx, batch(10)); err != nil {
		t.Fatalf("send once the stream can be made again: %v", err)
	}

	if err := js.DeleteStream(ctx, "SVC_DECISIONS"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"svc.decisions"}}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Send(ctx, batch(20)); err == nil || !strings.Contains(err.Error(), "another stream") {
		t.Fatalf("send with another stream on the subject: %v, want an error naming it", err)
	}
	if err := sink.Send(ctx, batch(20)); err == nil || !strings.Contains(err.Error(), "stream SVC_DECISIONS") {
		t.Fatalf("send again: %v, want the stream's setup refused", err)
	}
	if err := js.DeleteStream(ctx, "OTHER"); err != nil {
		t.Fatal(err)
	}
	if err := sink.Send(ctx, batch(20)); err != nil {
		t.Fatalf("send once the subject is free: %v", err)
	}
	if msgs, ids := srv.MsgIDs(t, "SVC_DECISIONS"); msgs != 10 || ids["dec-000020"] != 1 || ids["dec-000029"] != 1 {
		t.Fatalf("the stream made again holds %d messages (%v), want the last batch's 10", msgs, ids)
	}
}

// BenchmarkNATSSend measures the NATS sink's Send of 500-record batches
// of 100 B and 1 KB records (its share of the sidecar's CPU: publishing
// and waiting for every acknowledgement), per record: wall time, with the
// NATS server on the same cores, this process's CPU time and the
// server's.
func BenchmarkNATSSend(b *testing.B) {
	srv := natstest.Start(b)
	sink, err := decisionlog.NewNATS(decisionlog.NATSOptions{URL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sink.Close() })
	// The server's CPU per record is JetStream's per message more than
	// per byte: the sizes show how much.
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			body := []byte(`{"decision_id":"` + strings.Repeat("x", size) + `"}`)
			benchSend(b, sink, srv.Pid(), func(n int) decisionlog.Record {
				return decisionlog.Record{DecisionID: fmt.Sprintf("dec-%d-%09d", size, n), Tenant: "acme", JSON: body}
			})
		})
	}
}

// benchSend sends batches of 500 records of record(n), n counting up,
// to sink: a batch before timing, then b.N batches. It reports
// ns/record and cpu-ns/record, the CPU of this process, and, when
// serverPid is not 0, server-cpu-ns/record, the CPU of the sink's server
// in that process (on the same cores: not the sidecar's, but the
// machine's).
func benchSend(b *testing.B, sink decisionlog.Sink, serverPid int, record func(n int) decisionlog.Record) {
	batch := make([]decisionlog.Record, 500)
	n := 0
	next := func() {
		for i := range batch {
			n++
			batch[i] = record(n)
		}
	}
	next()
	if err := sink.Send(b.Context(), batch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var cpu time.Duration
	var server0 time.Duration
	if serverPid != 0 {
		server0 = testkit.ProcessCPU(b, serverPid)
	}
	for b.Loop() {
		b.StopTimer()
		next()
		cpu0 := testkit.ProcessCPU(b, 0)
		b.StartTimer()
		if err := sink.Send(b.Context(), batch); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		cpu += testkit.ProcessCPU(b, 0) - cpu0
		b.StartTimer()
	}
	records := float64(b.N * len(batch))
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/records, "ns/record")
	b.ReportMetric(float64(cpu.Nanoseconds())/records, "cpu-ns/record")
	if serverPid != 0 {
		b.ReportMetric(float64((testkit.ProcessCPU(b, serverPid)-server0).Nanoseconds())/records, "server-cpu-ns/record")
	}
}

// A batch goes when it is full or at the flush interval, not before; a
// Logger that stops sends what waits, so that a graceful stop leaves
// nothing behind while the sink is up.
func TestNATSBatchesAndStopFlush(t *testing.T) {
	srv := natstest.Start(t)
	sink, err := decisionlog.NewNATS(decisionlog.NATSOptions{URL: srv.URL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, stop := runLoggerWith(t, sink, decisionlog.Options{
		Spool:         spool.Options{Dir: t.TempDir()},
		FlushInterval: time.Hour, BatchMaxRecords: 100,
	})
	logN(t, l, 0, 250)
	testkit.Eventually(t, "the full batches shipped", func() bool { return l.Stats().Shipped == 200 })
	time.Sleep(50 * time.Millisecond)
	if st := l.Stats(); st.Shipped != 200 || st.Unsent != 50 {
		t.Fatalf("%+v, want 200 shipped in full batches and 50 waiting for the next", st)
	}
	stop()
	if st := l.Stats(); st.Shipped != 250 || st.Unsent != 0 {
		t.Fatalf("stopped: %+v, want all 250 shipped", st)
	}
	wantExactlyOnce(t, srv, 250)
}

// A tls:// server whose certificate a private authority signed is
// reached with that authority as RootCAs; without it, nothing is sent.
func TestNATSPrivateAuthority(t *testing.T) {
	ca := testkit.NewCA(t, "nats-ca")
	roots := ca.Pool()
	srv := natstest.StartTLS(t, ca.Server(t), roots)
	batch := []decisionlog.Record{{DecisionID: "dec-000000", Tenant: "acme", JSON: []byte(`{"decision_id":"dec-000000"}`)}}

	untrusted, err := decisionlog.NewNATS(decisionlog.NATSOptions{URL: srv.URL(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := untrusted.Send(ctx, batch); err == nil {
		t.Fatal("a server whose certificate no trusted authority signed took the batch")
	}
	untrusted.Close()

	sink, err := decisionlog.NewNATS(decisionlog.NATSOptions{URL: srv.URL(), Timeout: 5 * time.Second, RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	testkit.Eventually(t, "the batch sent over TLS", func() bool {
		return sink.Send(context.Background(), batch) == nil
	})
	wantExactlyOnce(t, srv, 1)
}

// BenchmarkJetStreamServer measures what a NATS server spends per
// message of 600 bytes published in batches of 500 from one connection,
// whatever the sink does: JetStream with file or memory storage, with
// and without the Nats-Msg-Id de-duplication and acknowledgements, and
// core NATS (no stream) for comparison. It reports server-cpu-ns/msg.
func BenchmarkJetStreamServer(b *testing.B) {
	for _, v := range []struct {
		name           string
		stream, dedupe bool
		ack            bool
		storage        jetstream.StorageType
	}{
		{"file,dedupe,ack", true, true, true, jetstream.FileStorage},
		{"file,ack", true, false, true, jetstream.FileStorage},
		{"file,dedupe", true, true, false, jetstream.FileStorage},
		{"memory,dedupe,ack", true, true, true, jetstream.MemoryStorage},
		{"core", false, false, false, jetstream.FileStorage},
	} {
		b.Run(v.name, func(b *testing.B) {
			srv := natstest.Start(b)
			nc, err := nats.Connect(srv.URL())
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			if v.stream {
				js, err := jetstream.New(nc)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := js.CreateOrUpdateStream(b.Context(), jetstream.StreamConfig{
					Name: "S", Subjects: []string{"svc.d"}, Storage: v.storage, Duplicates: time.Hour,
				}); err != nil {
					b.Fatal(err)
				}
			}
			acks, err := nc.SubscribeSync("_INBOX.bench.*")
			if err != nil {
				b.Fatal(err)
			}
			_ = acks.SetPendingLimits(-1, -1)
			body := []byte(`{"decision_id":"` + strings.Repeat("x", 600) + `"}`)
			n := 0
			batch := func() {
				for range 500 {
					n++
					m := &nats.Msg{Subject: "svc.d", Data: body, Header: nats.Header{}}
					if v.dedupe {
						m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("dec-%09d", n))
					}
					if v.ack {
						m.Reply = "_INBOX.bench.1"
					}
					if err := nc.PublishMsg(m); err != nil {
						b.Fatal(err)
					}
				}
				if !v.ack {
					if err := nc.Flush(); err != nil {
						b.Fatal(err)
					}
					return
				}
				for range 500 {
					if _, err := acks.NextMsg(10 * time.Second); err != nil {
						b.Fatal(err)
					}
				}
			}
			batch()
			cpu0 := testkit.ProcessCPU(b, srv.Pid())
			for b.Loop() {
				batch()
			}
			// The server may still be storing what a flush handed it.
			time.Sleep(200 * time.Millisecond)
			b.ReportMetric(float64((testkit.ProcessCPU(b, srv.Pid())-cpu0).Nanoseconds())/float64(b.N*500), "server-cpu-ns/msg")
		})
	}
}

// Records spooled by a process whose sink took larger ones than the NATS
// server does (its max_payload, 1 MiB) do not hold up the records behind
// them: one is sent without its input, "input_omitted" saying so; one
// too large even without it is dropped, counted and logged.
func TestNATSRecordsOverMaxPayload(t *testing.T) {
	root := t.TempDir()
	svc := startLogService(t, "")
	svc.status.Store(http.StatusServiceUnavailable)
	opts := decisionlog.Options{Spool: spool.Options{Dir: root, SegmentBytes: 8 << 20}, FlushInterval: 20 * time.Millisecond}
	prev, stop := startHTTPLogger(t, svc, opts)
	big := strings.Repeat("a", 1200<<10)
	for _, r := range []decisionlog.Record{
		{DecisionID: "dec-000000", JSON: []byte(`{"decision_id":"dec-000000"}`)},
		{DecisionID: "dec-000001", JSON: []byte(`{"decision_id":"dec-000001","allow":true,"input":{"path":"` + big + `"},"tenant":"acme"}`)},
		{DecisionID: "dec-000002", JSON: []byte(`{"decision_id":"dec-000002","deny_reasons":["` + big + `"],"input":{}}`)},
		{DecisionID: "dec-000003", JSON: []byte(`{"decision_id":"dec-000003"}`)},
	} {
		if err := prev.Log(r); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, "the sink's refusal seen", func() bool { return prev.Stats().Retries > 0 })
	stop()

	srv := natstest.Start(t)
	sink, err := decisionlog.NewNATS(decisionlog.NATSOptions{URL: srv.URL(), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if n := sink.MaxRecordBytes(); n <= 900<<10 || n > 1<<20 {
		t.Fatalf("MaxRecordBytes %d, want under the server's 1 MiB max_payload", n)
	}
	var logs testkit.SyncBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l, _ := runLoggerWith(t, sink, opts)
	testkit.Eventually(t, "the records shipped", func() bool { return l.Stats().Shipped == 3 })
	if st := l.Stats(); st.Dropped != 1 || st.Unsent != 0 {
		t.Errorf("stats %+v, want 1 dropped, none unsent", st)
	}
	msgs := srv.Messages(t, "SVC_DECISIONS")
	got := map[string]string{}
	for _, m := range msgs {
		got[m.Header.Get(jetstream.MsgIDHeader)] = string(m.Data)
	}
	if len(msgs) != 3 || got["dec-000000"] == "" || got["dec-000003"] == "" || got["dec-000002"] != "" {
		t.Errorf("stream holds %d messages: %v", len(msgs), slices.Sorted(maps.Keys(got)))
	}
	if want := `{"decision_id":"dec-000001","allow":true,"tenant":"acme","input_omitted":"too-large"}`; got["dec-000001"] != want {
		t.Errorf("oversized record sent as %.200s, want %s", got["dec-000001"], want)
	}
	if out := logs.String(); !strings.Contains(out, "dec-000001") || !strings.Contains(out, "without its input") ||
		!strings.Contains(out, "dec-000002") || !strings.Contains(out, "dropped") {
		t.Errorf("no warning naming the oversized records:\n%s", out)
	}
}
