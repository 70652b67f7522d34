package spool_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/internal/testkit"
)

func open(t testing.TB, opts spool.Options) *spool.Spool {
	t.Helper()
	s, err := spool.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func appendN(t testing.TB, s *spool.Spool, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if err := s.Append([]byte(fmt.Sprintf("record-%06d", i))); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
}

// readAll reads every unread record, in batches of batch.
func readAll(t testing.TB, s *spool.Spool, batch int) []spool.Entry {
	t.Helper()
	var out []spool.Entry
	for {
		es, err := s.Read(nil, batch, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			return out
		}
		out = append(out, es...)
	}
}

func wantRecords(t testing.TB, es []spool.Entry, from, n int) {
	t.Helper()
	if len(es) != n {
		t.Fatalf("read %d records, want %d", len(es), n)
	}
	for i, e := range es {
		if want := fmt.Sprintf("record-%06d", from+i); string(e.Data) != want {
			t.Fatalf("record %d is %q, want %q", i, e.Data, want)
		}
	}
}

// Records come back in order across segments; acknowledged ones are not
// read again after a reopen, unacknowledged ones are, and acknowledged
// segments are deleted.
func TestAppendReadAckReopen(t *testing.T) {
	dir := t.TempDir()
	opts := spool.Options{Dir: dir, SegmentBytes: 64 << 10, MaxBytes: 64 << 20}
	s := open(t, opts)
	appendN(t, s, 0, 5000)
	es := readAll(t, s, 128)
	wantRecords(t, es, 0, 5000)
	segs, _ := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if len(segs) < 3 {
		t.Fatalf("%d segments for 5000 records of 64 KiB segments, want several", len(segs))
	}
	s.Ack(es[2999].Next)
	if st := s.Stats(); st.Unsent != 2000 || s.Unsent() != 2000 {
		t.Fatalf("unsent %d (Unsent %d) after acknowledging 3000 of 5000", st.Unsent, s.Unsent())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if len(after) >= len(segs) {
		t.Errorf("%d segments after acknowledging 3000 records, %d before: none deleted", len(after), len(segs))
	}

	s = open(t, opts)
	if st := s.Stats(); st.Unsent != 2000 {
		t.Fatalf("unsent %d after reopening, want 2000", st.Unsent)
	}
	es = readAll(t, s, 1000)
	wantRecords(t, es, 3000, 2000)
	// Not acknowledged: read again after a rewind, and after a reopen.
	s.Rewind()
	wantRecords(t, readAll(t, s, 7), 3000, 2000)
	s.Close()
	s = open(t, opts)
	wantRecords(t, readAll(t, s, 500), 3000, 2000)
	appendN(t, s, 5000, 10)
	wantRecords(t, readAll(t, s, 500), 5000, 10)
}

// A torn tail (a crash mid-write) and a corrupt frame are cut off at
// Open; the records before them stay and appending goes on.
func TestTornTailIsCut(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"half a frame": func(b []byte) []byte { return append(b, b[:20]...) },
		"a bad checksum": func(b []byte) []byte {
			b[len(b)-3] ^= 0xff // inside the last record's data
			return b
		},
		"a huge length": func(b []byte) []byte {
			return append(b, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 'x')
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, spool.Options{Dir: dir})
			appendN(t, s, 0, 10)
			s.Close()
			segs, _ := filepath.Glob(filepath.Join(dir, "seg-*.log"))
			b, err := os.ReadFile(segs[len(segs)-1])
			if err != nil {
				t.Fatal(err)
			}
			testkit.WriteFile(t, segs[len(segs)-1], damage(b))
			s = open(t, spool.Options{Dir: dir})
			if s.Stats().Cut == 0 {
				t.Error("nothing cut")
			}
			es := readAll(t, s, 100)
			if name == "a bad checksum" {
				wantRecords(t, es, 0, 9)
			} else {
				wantRecords(t, es, 0, 10)
			}
			appendN(t, s, 100, 2)
			got := readAll(t, s, 100)
			wantRecords(t, got, 100, 2)
		})
	}
}

// A full spool drops its oldest segment and counts the records lost, or
// under Deny refuses the record.
func TestOverflow(t *testing.T) {
	t.Run("drop oldest", func(t *testing.T) {
		s := open(t, spool.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, MaxBytes: 256 << 10})
		appendN(t, s, 0, 20000)
		st := s.Stats()
		if st.Dropped == 0 || st.Bytes > 256<<10 {
			t.Fatalf("stats %+v: want drops and at most 256 KiB", st)
		}
		es := readAll(t, s, 1000)
		if int64(len(es)) != st.Unsent || int64(len(es))+st.Dropped != 20000 {
			t.Fatalf("read %d, unsent %d, dropped %d: want read = unsent, read + dropped = 20000", len(es), st.Unsent, st.Dropped)
		}
		wantRecords(t, es, 20000-len(es), len(es))
	})
	t.Run("deny", func(t *testing.T) {
		s := open(t, spool.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, MaxBytes: 128 << 10, Overflow: spool.Deny})
		var err error
		n := 0
		for ; n < 20000 && err == nil; n++ {
			err = s.Append([]byte(fmt.Sprintf("record-%06d", n)))
		}
		if !errors.Is(err, spool.ErrFull) {
			t.Fatalf("appending past the bound: %v, want ErrFull", err)
		}
		es := readAll(t, s, 1000)
		wantRecords(t, es, 0, n-1)
		s.Ack(es[len(es)-1].Next)
		if err := s.Append([]byte("record-999999")); err != nil {
			t.Fatalf("append after acknowledging everything: %v", err)
		}
	})
}

// Records a reader holds when their segment is dropped for room are
// counted once: shipped when the reader acknowledges them, dropped when
// it rewinds; never both.
func TestDroppedWhileInFlight(t *testing.T) {
	for name, acknowledged := range map[string]bool{"acknowledged": true, "rewound": false} {
		t.Run(name, func(t *testing.T) {
			s := open(t, spool.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, MaxBytes: 256 << 10})
			appendN(t, s, 0, 100)
			inflight, err := s.Read(nil, 100, 1<<20)
			if err != nil || len(inflight) != 100 {
				t.Fatalf("read %d records, %v", len(inflight), err)
			}
			appendN(t, s, 100, 20000)
			if st := s.Stats(); st.Dropped == 0 {
				t.Fatalf("stats %+v: want the first segment dropped", st)
			}
			var shipped int64
			if acknowledged {
				s.Ack(inflight[len(inflight)-1].Next)
				shipped += int64(len(inflight))
			} else {
				s.Rewind()
			}
			rest := readAll(t, s, 1000)
			s.Ack(rest[len(rest)-1].Next)
			shipped += int64(len(rest))
			if st := s.Stats(); st.Unsent != 0 || shipped+st.Dropped != 20100 {
				t.Fatalf("shipped %d, dropped %d, unsent %d: want shipped + dropped = the 20100 appended",
					shipped, st.Dropped, st.Unsent)
			}
		})
	}
}

// Stats say how old the oldest unacknowledged record is.
func TestOldestUnsent(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := open(t, spool.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, Now: func() time.Time { return now }})
	if st := s.Stats(); !st.OldestUnsent.IsZero() || st.Unsent != 0 {
		t.Fatalf("empty spool: %+v", st)
	}
	var times []time.Time
	for i := 0; i < 3000; i++ {
		now = now.Add(time.Second)
		times = append(times, now)
		appendN(t, s, i, 1)
	}
	es := readAll(t, s, 100)
	for _, k := range []int{0, 1, 1499, 2998} {
		s.Ack(es[k].Next)
		if got := s.Stats().OldestUnsent; !got.Equal(times[k+1]) {
			t.Fatalf("acknowledged through %d: oldest unsent %v, want %v", k, got, times[k+1])
		}
	}
	s.Ack(es[2999].Next)
	if st := s.Stats(); !st.OldestUnsent.IsZero() || st.Unsent != 0 {
		t.Fatalf("everything acknowledged: %+v", st)
	}
}

// A record Append returned for is on disk when the process is killed
// (SIGKILL) right after: the next Open reads it.
func TestAppendSurvivesKill(t *testing.T) {
	if dir := os.Getenv("SPOOL_KILL_DIR"); dir != "" {
		s, err := spool.Open(spool.Options{Dir: dir, SegmentBytes: 64 << 10})
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(1)
		}
		for i := 0; ; i++ {
			if err := s.Append([]byte(fmt.Sprintf("record-%06d", i))); err != nil {
				fmt.Println("append:", err)
				os.Exit(1)
			}
			fmt.Println(i)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAppendSurvivesKill$")
	cmd.Env = append(os.Environ(), "SPOOL_KILL_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	last := -1
	for sc.Scan() && last < 3000 {
		n, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("child: %s", sc.Text())
		}
		last = n
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	s := open(t, spool.Options{Dir: dir, SegmentBytes: 64 << 10})
	es := readAll(t, s, 1000)
	if len(es) <= last {
		t.Fatalf("%d records after the kill, but the child had appended %d", len(es), last+1)
	}
	wantRecords(t, es, 0, len(es))
}

// An acknowledgement reaches the cursor file at once: a process killed
// right after it (no Sync, no Close) does not have those records read
// again by the next.
func TestAckSurvivesWithoutSync(t *testing.T) {
	dir := t.TempDir()
	s := open(t, spool.Options{Dir: dir})
	appendN(t, s, 0, 10)
	es := readAll(t, s, 100)
	s.Ack(es[4].Next)
	next, err := spool.Open(spool.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	wantRecords(t, readAll(t, next, 100), 5, 5)
}

// The cursor is written over in place: acknowledgements that go back in
// length (a later segment, an earlier offset) leave no digits of the
// position before, and a cursor file of an earlier version, its numbers
// unpadded, is read and then written over whole.
func TestCursorWrittenInPlace(t *testing.T) {
	dir := t.TempDir()
	s := open(t, spool.Options{Dir: dir, SegmentBytes: 64 << 10})
	appendN(t, s, 0, 6000)
	es := readAll(t, s, 10000)
	// The last record of the first segment, then the first of the second.
	i := 0
	for es[i+1].Next.Segment == es[0].Next.Segment {
		i++
	}
	s.Ack(es[i].Next)
	s.Ack(es[i+1].Next)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cursor := filepath.Join(dir, "cursor")
	b, err := os.ReadFile(cursor)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%020d %020d\n", es[i+1].Next.Segment, es[i+1].Next.Offset); string(b) != want {
		t.Fatalf("cursor file %q, want %q", b, want)
	}
	s = open(t, spool.Options{Dir: dir, SegmentBytes: 64 << 10})
	wantRecords(t, readAll(t, s, 10000), i+2, 6000-i-2)
	_ = s.Close()

	// As an earlier version wrote it.
	old := fmt.Sprintf("%d %d\n", es[i+5].Next.Segment, es[i+5].Next.Offset)
	testkit.WriteFile(t, cursor, []byte(old))
	s = open(t, spool.Options{Dir: dir, SegmentBytes: 64 << 10})
	rest := readAll(t, s, 10000)
	wantRecords(t, rest, i+6, 6000-i-6)
	s.Ack(rest[0].Next)
	_ = s.Close()
	s = open(t, spool.Options{Dir: dir, SegmentBytes: 64 << 10})
	wantRecords(t, readAll(t, s, 10000), i+7, 6000-i-7)
}

// A backlog in one large segment is read batch by batch, in order, with
// records larger than a read of the disk among them; Unsent stays exact
// through acknowledgements, drops of records read but not acknowledged,
// and a rewind. Read into one Batch throughout, the same holds.
func TestBacklogReadInChunks(t *testing.T) {
	for _, name := range []string{"new memory", "one batch"} {
		t.Run(name, func(t *testing.T) {
			var b *spool.Batch
			if name == "one batch" {
				b = new(spool.Batch)
			}
			testBacklogReadInChunks(t, b)
		})
	}
}

func testBacklogReadInChunks(t *testing.T, b *spool.Batch) {
	s := open(t, spool.Options{Dir: t.TempDir(), SegmentBytes: 8 << 20, MaxBytes: 64 << 20})
	big := bytes.Repeat([]byte("x"), 600<<10) // past a read chunk
	var want [][]byte
	for i := range 3000 {
		rec := []byte(fmt.Sprintf("record-%06d", i))
		if i%1000 == 500 {
			rec = append(rec, big...)
		}
		if err := s.Append(rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec)
	}
	var got [][]byte
	for {
		es, err := s.Read(b, 100, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			// The next Read into b writes over the data.
			got = append(got, bytes.Clone(e.Data))
		}
		if len(got) == 1000 {
			// A failed send: read again from the last acknowledgement.
			s.Rewind()
			got = got[:900]
			continue
		}
		s.Ack(es[len(es)-1].Next)
		if u := s.Unsent(); u != int64(3000-len(got)) {
			t.Fatalf("after acknowledging %d records: unsent %d", len(got), u)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d: %.20q, want %.20q", i, got[i], want[i])
		}
	}

	// Records read, then dropped unsent before their acknowledgement.
	s = open(t, spool.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, MaxBytes: 256 << 10})
	appendN(t, s, 0, 1000)
	es, err := s.Read(b, 500, 1<<20)
	if err != nil || len(es) != 500 {
		t.Fatalf("read %d, %v", len(es), err)
	}
	appendN(t, s, 1000, 20000)
	s.Ack(es[len(es)-1].Next)
	if rest := readAll(t, s, 1000); int64(len(rest)) != s.Unsent() || s.Stats().Dropped == 0 {
		t.Fatalf("after drops: %d left to read, unsent %d, dropped %d", len(rest), s.Unsent(), s.Stats().Dropped)
	}
}

// A Read into a Batch takes the memory of the Read before when the
// records fit in it: a reader shipping batches of like size makes no
// garbage of them.
func TestReadIntoBatchReusesMemory(t *testing.T) {
	s := open(t, spool.Options{Dir: t.TempDir(), SegmentBytes: 64 << 10, MaxBytes: 64 << 20})
	appendN(t, s, 0, 3000)
	b := new(spool.Batch)
	var last *byte
	grew := true // the first Read takes new memory
	for i := 0; i < 30; i++ {
		es, err := s.Read(b, 100, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if &es[0] != &b.Entries[0] {
			t.Fatal("the entries are not the Batch's")
		}
		wantRecords(t, es, i*100, 100)
		if !grew && &es[0].Data[0] != last {
			t.Fatalf("read %d: the records are in new memory", i)
		}
		// Records of two segments are two reads of the disk, which may
		// not fit in the memory of one.
		last, grew = &es[0].Data[0], es[0].Next.Segment != es[len(es)-1].Next.Segment
		s.Ack(es[len(es)-1].Next)
	}
}

// Appends from many goroutines at once share writes: every record is in
// the file when its Append returns, whole and once, across segments,
// while a reader reads and acknowledges and Sync runs meanwhile; a
// reopened spool finds the same.
func TestConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	s, err := spool.Open(spool.Options{Dir: dir, MaxBytes: 64 << 20, SegmentBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 500
	var wg sync.WaitGroup
	seen := map[string]int{}
	readDone := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			es, err := s.Read(nil, 100, 1<<20)
			if err != nil {
				t.Error(err)
				return
			}
			for _, e := range es {
				seen[string(e.Data)]++
			}
			if len(es) > 0 {
				s.Ack(es[len(es)-1].Next)
				continue
			}
			select {
			case <-stop:
				return
			default:
				time.Sleep(time.Millisecond)
			}
		}
	}()
	syncDone := make(chan struct{})
	go func() {
		// Syncs meanwhile, across new segments.
		defer close(syncDone)
		for {
			if err := s.Sync(); err != nil {
				t.Errorf("sync: %v", err)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.Append([]byte(fmt.Sprintf("w%02d-record-%06d", w, i))); err != nil {
					t.Errorf("append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-readDone
	<-syncDone
	// What the reader had not reached when it stopped: the unsent.
	rest := readAll(t, s, 1000)
	for _, e := range rest {
		seen[string(e.Data)]++
	}
	if st := s.Stats(); st.Unsent != int64(len(rest)) {
		t.Fatalf("%d unsent, want the %d records not acknowledged", st.Unsent, len(rest))
	}
	if len(seen) != writers*each {
		t.Fatalf("read %d distinct records, want %d", len(seen), writers*each)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("record %s read %d times", k, c)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened: nothing torn, the unacknowledged records still there.
	s = open(t, spool.Options{Dir: dir, MaxBytes: 64 << 20, SegmentBytes: 64 << 10})
	if st := s.Stats(); st.Cut != 0 || st.Unsent != int64(len(rest)) {
		t.Fatalf("reopened: %+v, want nothing cut and the %d records not acknowledged", st, len(rest))
	}
}

// The segment being written to is as long as a whole segment, its room
// zeros; what a process that died left is read back whole, with only a
// torn frame (not the zeros after it) counted as cut, and the segment is
// written to on from its last record.
func TestDeadProcessSegment(t *testing.T) {
	for name, torn := range map[string][]byte{"no frame torn": nil, "a frame torn": {0, 0, 0, 9, 1, 2, 3}} {
		t.Run(name, func(t *testing.T) {
			liveDir := t.TempDir()
			live := open(t, spool.Options{Dir: liveDir, SegmentBytes: 64 << 10})
			appendN(t, live, 0, 10)
			segs, _ := filepath.Glob(filepath.Join(liveDir, "seg-*.log"))
			b, err := os.ReadFile(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != 64<<10 {
				t.Fatalf("the segment written to is %d bytes, want the whole segment's 64 KiB", len(b))
			}
			// The files as the process's death leaves them.
			dir := t.TempDir()
			end := bytes.LastIndex(b, []byte("record-000009")) + len("record-000009")
			copy(b[end:], torn)
			testkit.WriteFile(t, filepath.Join(dir, filepath.Base(segs[0])), b)
			s := open(t, spool.Options{Dir: dir, SegmentBytes: 64 << 10})
			if cut := s.Stats().Cut; cut != int64(len(torn)) {
				t.Fatalf("cut %d bytes, want %d", cut, len(torn))
			}
			wantRecords(t, readAll(t, s, 100), 0, 10)
			appendN(t, s, 10, 5)
			wantRecords(t, readAll(t, s, 100), 10, 5)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(dir, filepath.Base(segs[0])))
			if err != nil || fi.Size() != int64(end)+5*int64(end/10) {
				t.Fatalf("closed segment: %v, %v; want it cut to its 15 records", fi, err)
			}
		})
	}
}
