package spool

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// A segment is checked when the spool is opened. Its frames are read in
// order; where one is torn or fails its checksum, the frames after it
// are looked for, byte by byte: a crash mid-copy tears only the last
// frame (the tail, cut off), while a damaged block of the disk spoils
// frames in the middle, and the records after them must not be lost with
// them. The corrupt stretches are skipped, counted as lost and logged,
// and the segment is written again without them.

// repairSuffix names the file a segment is written to when it is
// repaired, before it is renamed over the segment.
const repairSuffix = ".repair"

// hole is a corrupt stretch of a segment, [from, to), followed by a good
// frame at to.
type hole struct{ from, to int }

// check reads segment seq's frames, skipping corrupt stretches followed
// by good frames and cutting the file after its last good frame.
func (s *Spool) check(seq uint64) (*segment, error) {
	path := s.path(seq)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	// The segment written to is as long as a whole segment: past its
	// records, zeros never written, its room rather than a tail.
	end := len(data)
	for end > 0 && data[end-1] == 0 {
		end--
	}
	seg := &segment{seq: seq}
	var holes []hole
	var last time.Time // the append time of the last good frame
	// The bytes the search for good frames may checksum: bounded, so
	// that a segment of garbage is given up on in about the time it
	// takes to read, and cut.
	budget := 2*int64(len(data)) + 1<<20
	off := 0
	for off < len(data) {
		f, n, ok := decodeFrame(data[off:])
		if !ok {
			next, found := resync(data[:end], off, last, s.opts.Now(), &budget)
			if !found {
				break
			}
			holes = append(holes, hole{off, next})
			off = next
			continue
		}
		if seg.records == 0 {
			seg.first = f.appended
		}
		last = f.appended
		seg.records++
		off += n
	}
	if off < end {
		// Only what a write left (a torn or corrupt frame) is cut.
		s.cut += int64(end - off)
		s.opts.Logger.Warn("decision log spool: torn or corrupt tail cut off (a record being written when the process stopped)",
			"segment", path, "offset", off, "bytes", end-off)
	}
	if len(holes) == 0 {
		if off < len(data) {
			if err := os.Truncate(path, int64(off)); err != nil {
				return nil, fmt.Errorf("spool: cutting the torn tail of %s: %w", filepath.Base(path), err)
			}
		}
		seg.size = int64(off)
		return seg, nil
	}
	kept := make([]byte, 0, off)
	from := 0
	for _, h := range holes {
		kept = append(kept, data[from:h.from]...)
		from = h.to
		records := framesIn(data[h.from:h.to])
		unsent := seq > s.acked.Segment || seq == s.acked.Segment && int64(h.to) > s.acked.Offset
		if unsent {
			s.skipped += records
			s.skippedBytes += int64(h.to - h.from)
		}
		s.opts.Logger.Warn("decision log spool: corrupt records skipped, the records after them kept",
			"segment", path, "offset", h.from, "bytes", h.to-h.from, "records", records, "unsent", unsent)
	}
	kept = append(kept, data[from:off]...)
	if seq == s.acked.Segment {
		// The cursor moves with the records after the holes. Written
		// before the segment: a crash between the two leaves it before
		// where it was, and records are sent again rather than skipped.
		if p := movedOffset(s.acked.Offset, holes); p != s.acked.Offset {
			s.acked.Offset = p
			if err := s.writeCursor(s.acked, true); err != nil {
				return nil, err
			}
		}
	}
	if err := replace(path, kept); err != nil {
		return nil, err
	}
	seg.size = int64(len(kept))
	return seg, nil
}

// resync is the offset of the first good frame in data after off, where
// a frame is torn or corrupt; false when there is none. A frame's
// checksum is computed only where its header is plausible (a length
// that fits in data, an append time no earlier than an hour before last,
// the last good frame's when there is one, and no later than a day after
// now) and is followed by the end of data, a header torn short or
// another header with such a time: so that a scan through damaged bytes
// does not compute a checksum over megabytes at every offset. The
// checksums computed take from budget, bytes; none is computed past it.
func resync(data []byte, off int, last, now time.Time, budget *int64) (int, bool) {
	lo, hi := int64(0), now.Add(24*time.Hour).UnixNano()
	if !last.IsZero() {
		lo = last.Add(-time.Hour).UnixNano()
		hi = max(hi, last.Add(24*time.Hour).UnixNano())
	}
	timely := func(i int) bool {
		t := frameTime(data[i:]).UnixNano()
		return t >= lo && t <= hi
	}
	plausible := func(i int) (int, bool) {
		n, ok := frameLen(data[i:])
		if !ok || n > frameHeader+maxRecord || n > int64(len(data)-i) || !timely(i) {
			return 0, false
		}
		return i + int(n), true
	}
	follows := func(i int) bool {
		return len(data)-i < frameHeader || timely(i)
	}
	// Most often one byte of a frame's data or checksum is wrong, and
	// the next frame is where its length says.
	checks := func(i int) bool {
		n, _ := frameLen(data[i:])
		if *budget < n {
			return false
		}
		*budget -= n
		_, _, ok := decodeFrame(data[i:])
		return ok
	}
	if n, ok := frameLen(data[off:]); ok && n <= frameHeader+maxRecord && int64(off)+n+frameHeader <= int64(len(data)) {
		if checks(off + int(n)) {
			return off + int(n), true
		}
	}
	for i := off + 1; i+frameHeader <= len(data) && *budget > 0; i++ {
		if next, ok := plausible(i); ok && follows(next) && checks(i) {
			return i, true
		}
	}
	return 0, false
}

// framesIn is the number of records in a corrupt stretch b: as many
// frames as their headers chain through it exactly, or else one.
func framesIn(b []byte) int64 {
	var n int64
	for off := 0; off < len(b); n++ {
		l, ok := frameLen(b[off:])
		if !ok || l > int64(len(b)-off) {
			return 1
		}
		off += int(l)
	}
	return max(n, 1)
}

// movedOffset is where the frame at off is once the holes are taken out
// of its segment; an offset inside a hole moves to where the hole was.
func movedOffset(off int64, holes []hole) int64 {
	var gone int64
	for _, h := range holes {
		switch {
		case off >= int64(h.to):
			gone += int64(h.to - h.from)
		case off > int64(h.from):
			return int64(h.from) - gone
		}
	}
	return off - gone
}

// replace writes data to path through a file renamed over it, synced
// with its directory: a crash leaves the old segment or the new one.
func replace(path string, data []byte) error {
	tmp := path + repairSuffix
	err := os.WriteFile(tmp, data, 0o600)
	if err == nil {
		err = syncFile(tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("spool: repairing %s: %w", filepath.Base(path), err)
	}
	if err := syncFile(filepath.Dir(path)); err != nil {
		return fmt.Errorf("spool: repairing %s: %w", filepath.Base(path), err)
	}
	return nil
}

// syncFile syncs the file or directory at path to the disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
