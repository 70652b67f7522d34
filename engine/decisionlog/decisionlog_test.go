package decisionlog_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/decisionlog"
	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/internal/testkit"
)

// startHTTPLogger runs a Logger whose sink is svc, with opts (its sink's
// timeout 1s).
func startHTTPLogger(t *testing.T, svc *logService, opts decisionlog.Options) (*decisionlog.Logger, func()) {
	t.Helper()
	sink, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: svc.URL + "/v1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return runLoggerWith(t, sink, opts)
}

// A record the spool refuses (full under the deny overflow) is counted,
// and the Logger says it is refusing: its decision was not answered.
func TestRefusalsCounted(t *testing.T) {
	svc := startLogService(t, "")
	svc.status.Store(http.StatusServiceUnavailable)
	l, _ := startHTTPLogger(t, svc, decisionlog.Options{
		Spool:         spool.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, MaxBytes: 128 << 10, Overflow: spool.Deny},
		FlushInterval: time.Hour, BatchMaxRecords: 1 << 20,
	})
	if st := l.Stats(); st.Refused != 0 || st.Refusing {
		t.Fatalf("before any record: %+v, want nothing refused", st)
	}
	var err error
	n := 0
	for ; n < 100000 && err == nil; n++ {
		err = l.Log(decisionlog.Record{DecisionID: "dec", Tenant: "acme", JSON: []byte(`{"decision_id":"dec"}`)})
	}
	if !errors.Is(err, decisionlog.ErrFull) {
		t.Fatalf("after %d records: %v, want ErrFull", n, err)
	}
	_ = l.Log(decisionlog.Record{DecisionID: "dec", JSON: []byte(`{}`)})
	if st := l.Stats(); st.Refused != 2 || !st.Refusing || st.Dropped != 0 {
		t.Fatalf("after two refusals: %+v, want refused 2, refusing, nothing dropped", st)
	}
}

// A sink that has not failed is connected: before the first batch goes
// out (a long flush interval), the Logger does not say otherwise.
func TestConnectedBeforeTheFirstBatch(t *testing.T) {
	svc := startLogService(t, "")
	l, _ := startHTTPLogger(t, svc, decisionlog.Options{
		Spool:         spool.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10},
		FlushInterval: time.Hour,
	})
	logN(t, l, 0, 3)
	if st := l.Stats(); !st.Connected || st.Unsent != 3 || st.Shipped != 0 {
		t.Fatalf("before the first batch: %+v, want connected with 3 unsent", st)
	}
}

// leaveSpool is a process that stops with n records unsent in a spool
// under root, its HTTP sink refusing them: the sink, the options a
// successor opens the spool with, and the stopped logger.
func leaveSpool(t *testing.T, root string, n int) (*logService, decisionlog.Options, *decisionlog.Logger) {
	t.Helper()
	svc := startLogService(t, "")
	svc.status.Store(http.StatusServiceUnavailable)
	opts := decisionlog.Options{Spool: spool.Options{Dir: root, SegmentBytes: 64 << 10}, FlushInterval: 20 * time.Millisecond}
	l, stop := startHTTPLogger(t, svc, opts)
	logN(t, l, 0, n)
	testkit.Eventually(t, "the sink's refusal seen", func() bool { return l.Stats().Retries > 0 })
	stop()
	return svc, opts, l
}

// Once the spool a previous process left is shipped and its directory
// removed, its bytes are no longer counted: SpoolBytes is what is on
// disk.
func TestSpoolBytesAfterAdoptedSpoolShipped(t *testing.T) {
	root := t.TempDir()
	svc, opts, l := leaveSpool(t, root, 50)
	if st := l.Stats(); st.SpoolBytes == 0 || st.Unsent != 50 {
		t.Fatalf("stopped with the sink refusing: %+v, want 50 records left", st)
	}

	svc.status.Store(0)
	l, _ = startHTTPLogger(t, svc, opts)
	testkit.Eventually(t, "the records left shipped and their directory removed", func() bool {
		dirs, _ := filepath.Glob(filepath.Join(root, "p-*"))
		return l.Stats().Shipped == 50 && len(dirs) == 1
	})
	if st := l.Stats(); st.SpoolBytes != 0 || st.Unsent != 0 {
		t.Fatalf("after shipping what was left: %+v, want 0 spool bytes and nothing unsent", st)
	}
}

// A corrupt record in the middle of the spool a previous process left
// is skipped with a warning naming its segment and counted as dropped;
// the records after it are shipped.
func TestCorruptRecordOfAdoptedSpool(t *testing.T) {
	root := t.TempDir()
	svc, opts, _ := leaveSpool(t, root, 20)
	segs, _ := filepath.Glob(filepath.Join(root, "p-*", "seg-*.log"))
	if len(segs) != 1 {
		t.Fatalf("segments left: %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[bytes.LastIndex(b, []byte("dec-000010"))+2] ^= 0x01
	testkit.WriteFile(t, segs[0], b)

	svc.status.Store(0)
	var logs testkit.SyncBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	l, _ := startHTTPLogger(t, svc, opts)
	testkit.Eventually(t, "the records after the corrupt one shipped", func() bool { return l.Stats().Shipped == 19 })
	if st := l.Stats(); st.Dropped != 1 {
		t.Errorf("stats %+v, want the corrupt record counted as dropped", st)
	}
	got := svc.received()
	for i := range 20 {
		if id := fmt.Sprintf("dec-%06d", i); (got[id] == 0) != (i == 10) {
			t.Errorf("decision %s received %d times", id, got[id])
		}
	}
	if out := logs.String(); !strings.Contains(out, "corrupt records skipped") || !strings.Contains(out, filepath.Base(segs[0])) {
		t.Errorf("no warning naming the segment:\n%s", out)
	}
}
