package spool_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/internal/testkit"
)

// FuzzOpen: whatever a segment file holds (a crash, a disk fault, another
// program), Open neither fails nor panics, reads back only whole records
// whose checksums hold, and appends after them.
func FuzzOpen(f *testing.F) {
	good := f.TempDir()
	s, err := spool.Open(spool.Options{Dir: good})
	if err != nil {
		f.Fatal(err)
	}
	for _, r := range []string{"a", "", `{"decision_id":"d-1"}`} {
		if err := s.Append([]byte(r)); err != nil {
			f.Fatal(err)
		}
	}
	s.Close()
	segs, _ := filepath.Glob(filepath.Join(good, "seg-*.log"))
	whole, _ := os.ReadFile(segs[0])
	f.Add(whole)
	f.Add(whole[:len(whole)-1])
	f.Add(append(bytes.Clone(whole), 0, 0, 0, 1))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, seg []byte) {
		dir := t.TempDir()
		testkit.WriteFile(t, filepath.Join(dir, "seg-00000000000000000001.log"), seg)
		s, err := spool.Open(spool.Options{Dir: dir})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer s.Close()
		before := readAll(t, s, 50)
		st := s.Stats()
		if st.Unsent != int64(len(before)) {
			t.Fatalf("unsent %d, read %d", st.Unsent, len(before))
		}
		if err := s.Append([]byte("after")); err != nil {
			t.Fatal(err)
		}
		after := readAll(t, s, 50)
		if len(after) != 1 || string(after[0].Data) != "after" {
			t.Fatalf("after the damaged records, read %d records", len(after))
		}
		s.Ack(after[0].Next)
		if st := s.Stats(); st.Unsent != 0 {
			t.Fatalf("unsent %d after acknowledging everything", st.Unsent)
		}
	})
}

// FuzzCorruptFrame: whichever bit of whichever frame of a segment is
// flipped, every other record is read back, in order; only the last
// frame damaged is a tail cut off rather than a record skipped.
func FuzzCorruptFrame(f *testing.F) {
	f.Add(uint8(3), uint16(20), uint8(0))
	f.Add(uint8(0), uint16(0), uint8(7))
	f.Add(uint8(11), uint16(9), uint8(2))
	f.Fuzz(func(t *testing.T, k uint8, pos uint16, bit uint8) {
		const n = 12
		dir := t.TempDir()
		damageFrame(t, dir, n, int(k%n), int(pos), bit)
		s, err := spool.Open(spool.Options{Dir: dir})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer s.Close()
		wantAllBut(t, readAll(t, s, 5), 0, n, int(k%n))
		if st := s.Stats(); (st.Skipped == 1) != (int(k%n) != n-1) {
			t.Fatalf("frame %d of %d damaged: %+v", k%n, n, st)
		}
	})
}
