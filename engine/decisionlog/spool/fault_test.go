package spool

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// A disk full under the segment written to fails the appends, each
// refused, without a new segment file per refusal; once the disk has room
// again the spool goes on where it stopped, the frames torn by the
// faults written over.
func TestWriteFaultKeepsTheSegment(t *testing.T) {
	for name, before := range map[string]int{
		"inside a segment":   3,  // room for more in the segment
		"at a segment's end": 15, // the next record starts a new segment
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			opts := Options{Dir: dir, SegmentBytes: 64 << 10}
			s, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var full atomic.Bool
			s.put = func(dst []byte, at int64, sum uint32, data []byte) error {
				if full.Load() {
					// The first bytes copied, then the fault.
					copy(dst, "a torn frame, longer than a header")
					return errors.New("spool: writing the segment: unexpected fault address")
				}
				return putFrame(dst, at, sum, data)
			}
			record := func(i int) []byte { return []byte(fmt.Sprintf("%06d%s", i, strings.Repeat("x", 4000))) }
			for i := range before {
				if err := s.Append(record(i)); err != nil {
					t.Fatal(err)
				}
			}
			full.Store(true)
			for range 1000 {
				if err := s.Append(record(-1)); err == nil {
					t.Fatal("an append succeeded on a full disk")
				}
			}
			if segs, _ := filepath.Glob(filepath.Join(dir, "seg-*.log")); len(segs) > 2 {
				t.Fatalf("%d segment files after 1000 appends refused, want at most 2", len(segs))
			}
			full.Store(false)
			for i := before; i < before+5; i++ {
				if err := s.Append(record(i)); err != nil {
					t.Fatalf("append once the disk has room: %v", err)
				}
			}
			check := func(s *Spool) {
				t.Helper()
				var got []string
				for {
					es, err := s.Read(nil, 100, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					if len(es) == 0 {
						break
					}
					for _, e := range es {
						got = append(got, string(e.Data[:6]))
					}
				}
				if len(got) != before+5 {
					t.Fatalf("read %d records, want %d: %v", len(got), before+5, got)
				}
				for i, g := range got {
					if g != fmt.Sprintf("%06d", i) {
						t.Fatalf("record %d is %s", i, g)
					}
				}
			}
			check(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if st := s.Stats(); st.Cut != 0 || st.Unsent != int64(before+5) {
				t.Fatalf("reopened: %+v, want nothing cut and %d unsent", st, before+5)
			}
			check(s)
		})
	}
}
