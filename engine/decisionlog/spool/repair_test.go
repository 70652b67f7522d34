package spool_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/internal/testkit"
)

// corruptRecord is record i of a spool damaged by damageFrame: of
// various lengths.
func corruptRecord(i int) []byte {
	return []byte(fmt.Sprintf("record-%06d %s", i, strings.Repeat("x", i*37%300)))
}

// damageFrame writes n records to a spool in dir, closes it, and flips
// bit of byte pos of the frame of record k in the segment file.
func damageFrame(t testing.TB, dir string, n, k, pos int, bit byte) {
	t.Helper()
	s, err := spool.Open(spool.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.Append(corruptRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	off := 0
	for i := range k {
		off += 16 + len(corruptRecord(i))
	}
	closeAndFlip(t, s, dir, int64(off+pos%(16+len(corruptRecord(k)))), 1<<(bit%8))
}

// closeAndFlip closes s, the spool in dir, and flips the bits of mask in
// the byte at off of its one segment file.
func closeAndFlip(t testing.TB, s *spool.Spool, dir string, off int64, mask byte) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "seg-*.log"))
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= mask
	testkit.WriteFile(t, segs[0], b)
}

// wantAllBut checks that es are records from, from+1 ... n-1, but k.
func wantAllBut(t testing.TB, es []spool.Entry, from, n, k int) {
	t.Helper()
	var want [][]byte
	for i := from; i < n; i++ {
		if i != k {
			want = append(want, corruptRecord(i))
		}
	}
	if len(es) != len(want) {
		t.Fatalf("read %d records, want %d", len(es), len(want))
	}
	for i, e := range es {
		if !bytes.Equal(e.Data, want[i]) {
			t.Fatalf("record %d is %.13q, want %.13q", i, e.Data, want[i])
		}
	}
}

// A corrupt frame in the middle of a segment (a damaged disk block, not
// a crash) is skipped, counted, and the records after it are kept,
// whichever part of the frame is damaged; a spool opened again reads
// them, and appends after them.
func TestCorruptFrameSkipped(t *testing.T) {
	const n = 20
	for _, k := range []int{0, 1, 10, n - 2} {
		for part, pos := range map[string]int{"length": 1, "checksum": 5, "time": 12, "data": 20} {
			t.Run(fmt.Sprintf("frame %d of %d, its %s", k, n, part), func(t *testing.T) {
				dir := t.TempDir()
				damageFrame(t, dir, n, k, pos, 3)
				s := open(t, spool.Options{Dir: dir})
				st := s.Stats()
				if size := int64(16 + len(corruptRecord(k))); st.Skipped != 1 || st.SkippedBytes != size || st.Cut != 0 || st.Unsent != n-1 {
					t.Fatalf("stats %+v, want 1 record of %d bytes skipped, nothing cut, %d unsent", st, size, n-1)
				}
				wantAllBut(t, readAll(t, s, 7), 0, n, k)
				if err := s.Append(corruptRecord(n)); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = open(t, spool.Options{Dir: dir})
				if st := s.Stats(); st.Skipped != 0 || st.Cut != 0 {
					t.Fatalf("opened again: %+v, want nothing skipped or cut", st)
				}
				wantAllBut(t, readAll(t, s, 100), 0, n+1, k)
			})
		}
	}
}

// Records acknowledged before the damage are neither read again nor
// counted as lost; the cursor follows the records it was at.
func TestCorruptFrameBeforeTheCursor(t *testing.T) {
	const n, k = 20, 5
	dir := t.TempDir()
	s := open(t, spool.Options{Dir: dir})
	for i := range n {
		if err := s.Append(corruptRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
	es := readAll(t, s, 100)
	s.Ack(es[k+3].Next)
	closeAndFlip(t, s, dir, es[k].Next.Offset-3, 0x20) // in record k's data
	s = open(t, spool.Options{Dir: dir})
	if st := s.Stats(); st.Skipped != 0 || st.Unsent != n-k-4 {
		t.Fatalf("stats %+v: want nothing counted as skipped (acknowledged), %d unsent", st, n-k-4)
	}
	wantAllBut(t, readAll(t, s, 100), k+4, n, -1)
}
