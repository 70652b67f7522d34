package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
)

// gateWriter blocks every Write until release is closed, announcing each
// call on entered first.
type gateWriter struct {
	entered chan struct{}
	release chan struct{}
	testkit.SyncBuffer
}

func newGateWriter() *gateWriter {
	return &gateWriter{entered: make(chan struct{}, 1024), release: make(chan struct{})}
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.SyncBuffer.Write(p)
}

func decodeLines(t *testing.T, s string) []Record {
	t.Helper()
	var out []Record
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %d %q: %v", len(out)+1, sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

func seqRecord(i int) Record {
	r := fullRecord()
	r.DecisionID = fmt.Sprintf("d%05d", i)
	return r
}

func closeNow(t *testing.T, l *Logger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// logWithin runs fn and fails the test when it does not return in time:
// Log must never wait for the writer.
func logWithin(t *testing.T, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { fn(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Log blocked for more than %s", d)
	}
}

func TestLoggerWritesEveryField(t *testing.T) {
	var out testkit.SyncBuffer
	l := New(&out, Options{})
	l.Log(fullRecord())
	r := fullRecord()
	r.Time = time.Time{}
	r.DenyReasons = nil
	before := time.Now()
	l.Log(r)
	closeNow(t, l)

	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), out.String())
	}
	for i, line := range lines {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &keys); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		for _, k := range append(requiredKeys, "span_id", "source") {
			if _, ok := keys[k]; !ok {
				t.Errorf("line %d: key %q missing", i, k)
			}
		}
		if string(keys["deny_reasons"]) == "null" {
			t.Errorf("line %d: deny_reasons is null", i)
		}
	}
	recs := decodeLines(t, out.String())
	if recs[1].Time.Before(before.Add(-time.Second)) || recs[1].Time.After(time.Now()) {
		t.Errorf("zero time filled with %v, want about %v", recs[1].Time, before)
	}
	if s := l.Stats(); s.Written != 2 || s.Dropped != 0 || s.Failed != 0 || s.QueueCap != DefaultQueueSize {
		t.Errorf("stats = %+v", s)
	}
}

func TestLoggerPreservesOrder(t *testing.T) {
	const n = 2000
	var out testkit.SyncBuffer
	l := New(&out, Options{QueueSize: n})
	for i := range n {
		l.Log(seqRecord(i))
	}
	closeNow(t, l)
	recs := decodeLines(t, out.String())
	if len(recs) != n {
		t.Fatalf("got %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if want := fmt.Sprintf("d%05d", i); r.DecisionID != want {
			t.Fatalf("record %d has decision_id %s, want %s", i, r.DecisionID, want)
		}
	}
}

func TestLoggerSlowWriterDrops(t *testing.T) {
	const logged, queue = 100, 2
	g := newGateWriter()
	l := New(g, Options{QueueSize: queue})

	l.Log(seqRecord(0))
	<-g.entered // the writer now holds record 0 and is stuck in Write
	logWithin(t, 5*time.Second, func() {
		for i := 1; i < logged; i++ {
			l.Log(seqRecord(i))
		}
	})
	s := l.Stats()
	if want := uint64(logged - 1 - queue); s.Dropped != want || s.QueueLen != queue {
		t.Errorf("while blocked: stats = %+v, want dropped %d and queue_len %d", s, want, queue)
	}

	close(g.release)
	closeNow(t, l)
	s = l.Stats()
	if s.Written != 1+queue || s.Written+s.Dropped != logged || s.Failed != 0 {
		t.Errorf("after close: stats = %+v, want written %d, written+dropped %d", s, 1+queue, logged)
	}
	recs := decodeLines(t, g.String())
	if len(recs) != 1+queue || recs[0].DecisionID != "d00000" || recs[2].DecisionID != "d00002" {
		t.Errorf("written records = %d, want d00000..d00002", len(recs))
	}
}

func TestLoggerCloseDrains(t *testing.T) {
	const n = 500
	g := newGateWriter()
	l := New(g, Options{QueueSize: n})
	for i := range n {
		l.Log(seqRecord(i))
	}
	close(g.release)
	closeNow(t, l)
	if s := l.Stats(); s.Written != n || s.Dropped != 0 || s.QueueLen != 0 {
		t.Errorf("stats = %+v, want all %d written", s, n)
	}
	if recs := decodeLines(t, g.String()); len(recs) != n {
		t.Errorf("got %d lines, want %d", len(recs), n)
	}
}

func TestLoggerCloseDeadline(t *testing.T) {
	const n = 10
	g := newGateWriter()
	l := New(g, Options{QueueSize: 16})
	l.Log(seqRecord(0))
	<-g.entered
	for i := 1; i < n; i++ {
		l.Log(seqRecord(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := l.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want deadline exceeded", err)
	}
	close(g.release)
	closeNow(t, l) // waits for the writer to finish
	s := l.Stats()
	if s.Written+s.Dropped != n || s.Written == 0 || s.Dropped == 0 {
		t.Errorf("stats = %+v, want written+dropped = %d with both non-zero", s, n)
	}
}

func TestLoggerLogAfterClose(t *testing.T) {
	var out testkit.SyncBuffer
	l := New(&out, Options{})
	l.Log(seqRecord(0))
	closeNow(t, l)
	for i := range 3 {
		l.Log(seqRecord(i + 1))
	}
	closeNow(t, l) // a second Close is harmless
	if s := l.Stats(); s.Written != 1 || s.Dropped != 3 {
		t.Errorf("stats = %+v, want written 1, dropped 3", s)
	}
}

func TestLoggerConcurrentLog(t *testing.T) {
	const workers, each = 8, 500
	var out testkit.SyncBuffer
	l := New(&out, Options{QueueSize: 64})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				l.Log(seqRecord(w*each + i))
			}
		})
	}
	// Close races with the last Logs on purpose: nothing may panic and
	// every record must be accounted for.
	time.Sleep(time.Millisecond)
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closeErr := l.Close(closeCtx)
	wg.Wait()
	if closeErr != nil {
		t.Fatal(closeErr)
	}
	s := l.Stats()
	if s.Written+s.Dropped != workers*each {
		t.Errorf("stats = %+v, want written+dropped = %d", s, workers*each)
	}
	if recs := decodeLines(t, out.String()); uint64(len(recs)) != s.Written {
		t.Errorf("%d lines, stats say %d written", len(recs), s.Written)
	}
}

func TestLoggerFlushesWhenIdle(t *testing.T) {
	var out testkit.SyncBuffer
	l := New(&out, Options{FlushInterval: time.Hour})
	defer closeNow(t, l)
	l.Log(seqRecord(0))
	testkit.EventuallyWithin(t, 5*time.Second, "the record to be written while the queue is idle", func() bool {
		return strings.Contains(out.String(), "d00000")
	})
}

// failingWriter fails its first n writes.
type failingWriter struct {
	n int
	testkit.SyncBuffer
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.n > 0 {
		f.n--
		return 0, errors.New("disk full")
	}
	return f.SyncBuffer.Write(p)
}

func TestLoggerWriteErrors(t *testing.T) {
	var logs testkit.SyncBuffer
	fw := &failingWriter{n: 2}
	l := New(fw, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	for i := range 3 {
		l.Log(seqRecord(i))
		testkit.Eventually(t, "the record written or failed", func() bool { s := l.Stats(); return s.Written+s.Failed == uint64(i+1) })
	}
	closeNow(t, l)
	if s := l.Stats(); s.Failed != 2 || s.Written != 1 {
		t.Errorf("stats = %+v, want failed 2, written 1", s)
	}
	got := logs.String()
	if strings.Count(got, "audit log write failed") != 1 || !strings.Contains(got, "disk full") {
		t.Errorf("want one failure line naming the error, got:\n%s", got)
	}
	if !strings.Contains(got, `"records_lost":2`) {
		t.Errorf("want a recovery line counting 2 lost records, got:\n%s", got)
	}
	if strings.Contains(got, "user-42") {
		t.Errorf("record contents leaked into the log:\n%s", got)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "plain")
	testkit.WriteFile(t, notDir, nil)
	for _, tc := range []struct {
		name        string
		dest        string
		wantEnabled bool
		wantErr     string
	}{
		{"empty_is_disabled", "", false, ""},
		{"off_is_disabled", Off, false, ""},
		{"stdout", Stdout, true, ""},
		{"stderr", Stderr, true, ""},
		{"file", filepath.Join(dir, "audit.log"), true, ""},
		{"missing_directory", filepath.Join(dir, "nope", "audit.log"), false, "does not exist"},
		{"parent_is_a_file", filepath.Join(notDir, "audit.log"), false, "is not a directory"},
		{"destination_is_a_directory", dir, false, "open log file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Open(tc.dest, Options{})
			if testkit.ExpectErr(t, err, tc.wantErr) {
				return
			}
			if l.Enabled() != tc.wantEnabled {
				t.Errorf("Enabled() = %v, want %v", l.Enabled(), tc.wantEnabled)
			}
			if !tc.wantEnabled {
				l.Log(fullRecord())
				if s := l.Stats(); s != (Stats{}) {
					t.Errorf("disabled logger stats = %+v", s)
				}
			}
			closeNow(t, l)
		})
	}
}

func TestOpenFileAppendsWithMode0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	for i := range 2 {
		l, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		l.Log(seqRecord(i))
		closeNow(t, l)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode = %v, want 0600", perm)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	recs := decodeLines(t, string(data))
	if len(recs) != 2 || recs[0].DecisionID != "d00000" || recs[1].DecisionID != "d00001" {
		t.Errorf("file holds %d records, want d00000 then d00001:\n%s", len(recs), data)
	}
}

func TestNilLogger(t *testing.T) {
	var l *Logger
	l.Log(fullRecord())
	if l.Enabled() || l.Stats() != (Stats{}) || l.Close(context.Background()) != nil {
		t.Error("nil logger must do nothing")
	}
}

func TestOpenFileRotatesBySize(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	const n = 12000 // about 3.5 MB of records
	l, err := Open(path, Options{MaxSizeMB: 1, MaxBackups: 2, QueueSize: n})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		l.Log(seqRecord(i))
	}
	closeNow(t, l)
	if s := l.Stats(); s.Written != n || s.Dropped != 0 || s.Failed != 0 {
		t.Fatalf("stats = %+v, want all %d written", s, n)
	}
	var backups []string
	deadline := time.Now().Add(5 * time.Second)
	for {
		matches, err := filepath.Glob(filepath.Join(dir, "audit-*.log"))
		if err != nil {
			t.Fatal(err)
		}
		backups = matches
		// Old backups are removed in the background.
		if len(backups) <= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(backups) != 2 {
		t.Fatalf("rotated files = %v, want the 2 newest kept", backups)
	}
	seen := 0
	last := ""
	for _, p := range append(backups, path) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 1<<20 {
			t.Errorf("%s is %d bytes, over the 1 MB limit", p, fi.Size())
		}
		if perm := fi.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, perm)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		recs := decodeLines(t, string(data)) // every line a whole record
		seen += len(recs)
		if p == path && len(recs) > 0 {
			last = recs[len(recs)-1].DecisionID
		}
	}
	if want := seqRecord(n - 1).DecisionID; last != want {
		t.Errorf("newest record of the current file = %q, want %q", last, want)
	}
	r0 := seqRecord(0)
	size := len(r0.AppendJSON(nil)) + 1
	if seen >= n || seen*size < (2<<20)*9/10 {
		t.Errorf("%d records kept over 3 files, want between two files' worth and fewer than all %d", seen, n)
	}
}
