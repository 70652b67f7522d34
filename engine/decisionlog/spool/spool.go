// Package spool keeps records on disk until a sink has acknowledged them:
// the decision log's guarantee that a record written before its answer
// left the sidecar survives the sink's outage and the process's death.
//
// Records go to segment files in a directory, each framed with its length,
// a CRC-32C checksum and the time it was appended. Append writes the frame
// to the file at once (a write survives the process's death; Sync, run
// every fsync interval, makes it survive a power loss). A reader takes
// records in order (Read), and Ack records how far the sink has taken
// them, in a small cursor file; segments wholly acknowledged are deleted.
// Opening the directory again resumes from the cursor: whatever was
// appended and not acknowledged is read again, so delivery is at least
// once. A torn or corrupt tail (a crash mid-write) is cut off, not fatal.
//
// When appending would pass MaxBytes, the spool either drops its oldest
// segment (DropOldest, counting the records lost) or refuses the record
// (Deny, ErrFull).
package spool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Overflow is what Append does when the spool is full.
type Overflow string

const (
	// DropOldest deletes the oldest segment, unsent records included,
	// and counts them in Stats.Dropped.
	DropOldest Overflow = "drop_oldest"
	// Deny refuses the record with ErrFull.
	Deny Overflow = "deny"
)

// ErrFull is Append's refusal under Deny when the spool holds MaxBytes.
var ErrFull = errors.New("spool: full")

// ErrTooLarge refuses a record larger than a segment may hold.
var ErrTooLarge = errors.New("spool: record larger than a segment")

// Options configure a spool.
type Options struct {
	// Dir holds the segments and the cursor; created if missing.
	Dir string
	// MaxBytes bounds the segments' total size (default 1 GiB).
	MaxBytes int64
	// SegmentBytes is the size past which a new segment starts (default
	// MaxBytes/16, at least 64 KiB and at most 64 MiB).
	SegmentBytes int64
	// Overflow is what a full spool does (default DropOldest).
	Overflow Overflow
	// Now is the clock of the records' append times (default time.Now).
	Now func() time.Time
}

// Position is a place in the spool: a segment and an offset in it.
type Position struct {
	Segment uint64
	Offset  int64
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	return p.Segment < q.Segment || (p.Segment == q.Segment && p.Offset < q.Offset)
}

// Entry is one record read: its data, when it was appended, and the
// position just after it, which Ack takes.
type Entry struct {
	Data     []byte
	Appended time.Time
	Next     Position
}

// Stats is the state of a spool.
type Stats struct {
	// Bytes is the segments' total size.
	Bytes int64
	// Unsent is the number of records not acknowledged.
	Unsent int64
	// OldestUnsent is when the oldest unacknowledged record was
	// appended; zero when none waits.
	OldestUnsent time.Time
	// Dropped counts the records deleted unsent by DropOldest since Open.
	Dropped int64
	// Cut counts the bytes of torn or corrupt tails cut off at Open.
	Cut int64
}

// segment is one file of the spool.
type segment struct {
	seq     uint64
	size    int64
	records int64
	// first is the append time of its first record, zero when empty.
	first time.Time
}

// Spool is a directory of segments. Its methods are safe for concurrent
// use; Read and Ack are meant for one reader.
type Spool struct {
	opts Options

	mu       sync.Mutex
	segs     []*segment // oldest first; the last is written to
	w        *os.File   // the last segment
	bytes    int64
	acked    Position // everything before it is acknowledged
	read     Position // the next Read starts here
	unsent   int64
	dropped  int64
	cut      int64
	dirty    bool // written since the last Sync
	closed   bool
	ackDirty bool
	// readSince counts the records Read returned from acked on; exact
	// until a segment holding some of them is dropped, so that Ack of
	// everything read needs no count from the disk.
	readSince int64
	readExact bool
	// frame is Append's buffer, reused under mu.
	frame []byte

	// Group commit: one write at a time goes to the file, outside mu;
	// records appended meanwhile join group, written by its owner with
	// one write once the write in flight is done. writing is true while
	// a write is in flight or handed to the next group's owner;
	// inflight and queued are the bytes of that write and of group,
	// counted against the segment's and the spool's bounds.
	writing  bool
	group    *appendGroup
	inflight int64
	queued   int64
	// idle is signalled when writing ends, for what must not run while
	// a write is in flight (a new segment, Close).
	idle *sync.Cond
	// spare is a group buffer written out, for the next group.
	spare []byte

	// cmu orders the writes of the cursor file, which run without mu:
	// Append never waits for the cursor, nor for an fsync. Taken before
	// mu by those that hold both.
	cmu sync.Mutex
}

// appendGroup is the records that waited for a write in flight, written
// together by their first appender (owner).
type appendGroup struct {
	buf     []byte
	records int64
	first   time.Time
	// lead is closed when the owner is to write the group; done when it
	// has, err then holding the outcome.
	lead, done chan struct{}
	err        error
}

const (
	segPrefix  = "seg-"
	segSuffix  = ".log"
	cursorFile = "cursor"
)

// Open opens (or creates) the spool in opts.Dir, checking every segment:
// a torn or corrupt tail is cut off and counted in Stats.Cut.
func Open(opts Options) (*Spool, error) {
	if opts.Dir == "" {
		return nil, errors.New("spool: no directory")
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 30
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = min(max(opts.MaxBytes/16, 64<<10), 64<<20)
	}
	if opts.Overflow == "" {
		opts.Overflow = DropOldest
	}
	if opts.Overflow != DropOldest && opts.Overflow != Deny {
		return nil, fmt.Errorf("spool: overflow %q is neither %s nor %s", opts.Overflow, DropOldest, Deny)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s := &Spool{opts: opts}
	s.idle = sync.NewCond(&s.mu)
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load reads the cursor and checks the segments.
func (s *Spool) load() error {
	names, err := filepath.Glob(filepath.Join(s.opts.Dir, segPrefix+"*"+segSuffix))
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	var seqs []uint64
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(n), segPrefix), segSuffix)
		seq, err := strconv.ParseUint(base, 10, 64)
		if err != nil {
			continue // not ours
		}
		seqs = append(seqs, seq)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	s.acked = s.readCursor()
	for _, seq := range seqs {
		if seq < s.acked.Segment {
			// Acknowledged wholly before the process stopped, not yet
			// deleted.
			_ = os.Remove(s.path(seq))
			continue
		}
		seg, err := s.check(seq)
		if err != nil {
			return err
		}
		s.segs = append(s.segs, seg)
		s.bytes += seg.size
	}
	if len(s.segs) == 0 || s.acked.Segment < s.segs[0].seq {
		start := uint64(1)
		if len(s.segs) > 0 {
			start = s.segs[0].seq
		} else if s.acked.Segment > 0 {
			start = s.acked.Segment
		}
		s.acked = Position{Segment: start}
	}
	if len(s.segs) == 0 {
		if err := s.startSegment(s.acked.Segment); err != nil {
			return err
		}
	} else {
		last := s.segs[len(s.segs)-1]
		f, err := os.OpenFile(s.path(last.seq), os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("spool: %w", err)
		}
		s.w = f
	}
	if err := s.countUnsent(); err != nil {
		return err
	}
	s.read = s.acked
	s.readExact = true
	return nil
}

// check reads segment seq's frames, cutting the file at the first frame
// that is torn or fails its checksum.
func (s *Spool) check(seq uint64) (*segment, error) {
	path := s.path(seq)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	seg := &segment{seq: seq}
	off := 0
	for off < len(data) {
		f, n, ok := decodeFrame(data[off:])
		if !ok {
			break
		}
		if seg.records == 0 {
			seg.first = f.appended
		}
		seg.records++
		off += n
	}
	if off < len(data) {
		if err := os.Truncate(path, int64(off)); err != nil {
			return nil, fmt.Errorf("spool: cutting the torn tail of %s: %w", filepath.Base(path), err)
		}
		s.cut += int64(len(data) - off)
	}
	seg.size = int64(off)
	return seg, nil
}

// countUnsent counts the records at or after the cursor.
func (s *Spool) countUnsent() error {
	s.unsent = 0
	for _, seg := range s.segs {
		switch {
		case seg.seq > s.acked.Segment:
			s.unsent += seg.records
		case seg.seq == s.acked.Segment:
			if s.acked.Offset > seg.size {
				// A cursor past the cut tail: resume at the end.
				s.acked.Offset = seg.size
			}
			n, aligned, err := s.recordsFrom(seg, s.acked.Offset)
			if err != nil {
				return err
			}
			if !aligned {
				// A cursor from another life of the directory: resume
				// at the segment's start.
				s.acked.Offset = 0
			}
			s.unsent += n
		}
	}
	return nil
}

// recordsFrom counts seg's records from off on; when off is not a frame
// boundary (aligned false) it counts them all.
func (s *Spool) recordsFrom(seg *segment, off int64) (n int64, aligned bool, err error) {
	if off == 0 {
		return seg.records, true, nil
	}
	data, err := os.ReadFile(s.path(seg.seq))
	if err != nil {
		return 0, false, fmt.Errorf("spool: %w", err)
	}
	var pos, before int64
	for pos < off {
		_, n, ok := decodeFrame(data[pos:])
		if !ok {
			break
		}
		pos += int64(n)
		before++
	}
	if pos != off {
		return seg.records, false, nil
	}
	return seg.records - before, true, nil
}

func (s *Spool) path(seq uint64) string {
	return filepath.Join(s.opts.Dir, fmt.Sprintf("%s%020d%s", segPrefix, seq, segSuffix))
}

// startSegment creates segment seq and makes it the one written to.
func (s *Spool) startSegment(seq uint64) error {
	f, err := os.OpenFile(s.path(seq), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if s.w != nil {
		// The finished segment's last writes reach the disk with it.
		_ = s.w.Sync()
		_ = s.w.Close()
	}
	s.w = f
	s.segs = append(s.segs, &segment{seq: seq})
	return nil
}

// Append writes rec to the spool. The record is in the file when Append
// returns: it survives the process's death, and a power loss once Sync
// has run. Under Deny a full spool refuses it with ErrFull.
//
// Appends from many goroutines share writes: while one write is in
// flight, the records appended meanwhile wait and go to the file
// together, with the next write, before any of their Appends returns.
func (s *Spool) Append(rec []byte) error {
	now := s.opts.Now()
	n := int64(frameHeader + len(rec))
	if n > s.opts.SegmentBytes {
		return ErrTooLarge
	}
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return errors.New("spool: closed")
		}
		last := s.segs[len(s.segs)-1]
		pending := s.inflight + s.queued
		if last.size+pending > 0 && last.size+pending+n > s.opts.SegmentBytes {
			if s.writing {
				// A new segment waits for the writes to the last one.
				s.idle.Wait()
				continue
			}
			if err := s.startSegment(last.seq + 1); err != nil {
				s.mu.Unlock()
				return err
			}
			continue
		}
		break
	}
	for s.bytes+s.inflight+s.queued+n > s.opts.MaxBytes {
		if s.opts.Overflow == Deny || len(s.segs) == 1 {
			s.mu.Unlock()
			return ErrFull
		}
		s.dropOldest()
	}
	if !s.writing {
		// Nothing in flight: this record is written at once, alone.
		s.frame = appendFrame(s.frame[:0], now, rec)
		buf := s.frame
		if cap(s.frame) > appendBufferKeep {
			s.frame = nil
		}
		return s.writeLocked(buf, 1, now, false)
	}
	g := s.group
	owner := g == nil
	if owner {
		g = &appendGroup{buf: s.spare[:0], first: now, lead: make(chan struct{}), done: make(chan struct{})}
		s.spare = nil
		s.group = g
	}
	g.buf = appendFrame(g.buf, now, rec)
	g.records++
	s.queued += n
	s.mu.Unlock()
	if owner {
		// The write in flight hands over to this group once it is done.
		<-g.lead
		s.mu.Lock()
		s.group = nil
		s.queued -= int64(len(g.buf))
		if s.closed {
			g.err = errors.New("spool: closed")
			s.writing = false
			s.idle.Broadcast()
			s.mu.Unlock()
		} else {
			g.err = s.writeLocked(g.buf, g.records, g.first, true)
		}
		close(g.done)
		return g.err
	}
	<-g.done
	return g.err
}

// writeLocked writes buf, records frames the first appended at first,
// to the last segment, with mu held on entry and released on return;
// grouped says buf is a group's, kept for a next group.
// The write itself runs without mu, so that records appended meanwhile
// gather in the next group; when the write is done it hands over to that
// group, if any.
func (s *Spool) writeLocked(buf []byte, records int64, first time.Time, grouped bool) error {
	last := s.segs[len(s.segs)-1]
	s.writing = true
	s.inflight = int64(len(buf))
	s.mu.Unlock()
	_, werr := s.w.Write(buf)
	s.mu.Lock()
	s.inflight = 0
	var err error
	if werr != nil {
		// A short write leaves a torn frame that the next Open cuts;
		// until then the segment is done with.
		_ = s.startSegment(last.seq + 1)
		err = fmt.Errorf("spool: %w", werr)
	} else {
		if last.records == 0 {
			last.first = first
		}
		size := int64(len(buf))
		last.size += size
		last.records += records
		s.bytes += size
		s.unsent += records
		s.dirty = true
	}
	if grouped && s.spare == nil && cap(buf) <= appendBufferKeep {
		s.spare = buf[:0]
	}
	if next := s.group; next != nil {
		// writing stays true: the next group's owner writes now.
		close(next.lead)
	} else {
		s.writing = false
		s.idle.Broadcast()
	}
	s.mu.Unlock()
	return err
}

// appendBufferKeep is the largest frame buffer Append keeps for the
// next record; a larger one (a rare huge record) is let go.
const appendBufferKeep = 64 << 10

// readChunk is the least Read takes from a segment file at once.
const readChunk = 64 << 10

// dropOldest deletes the oldest segment, which is not the one written to,
// counting its unsent records; the cursor moves past it.
func (s *Spool) dropOldest() {
	// Records Read returned may go with it: Ack counts from the disk.
	s.readExact = false
	old := s.segs[0]
	lost := old.records
	if s.acked.Segment == old.seq && s.acked.Offset > 0 {
		// The cursor is a frame boundary: acknowledgements set it.
		if n, _, err := s.recordsFrom(old, s.acked.Offset); err == nil {
			lost = n
		}
	} else if s.acked.Segment > old.seq {
		lost = 0
	}
	_ = os.Remove(s.path(old.seq))
	s.segs = s.segs[1:]
	s.bytes -= old.size
	s.unsent -= lost
	s.dropped += lost
	next := Position{Segment: s.segs[0].seq}
	if s.acked.Less(next) {
		s.acked = next
		s.ackDirty = true
	}
	if s.read.Less(next) {
		s.read = next
	}
}

// Read returns up to limit records from where the last Read stopped (at
// most maxBytes of data, but at least one record). It returns no entries
// when every record has been read.
func (s *Spool) Read(limit int, maxBytes int64) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Entry
	var size, counted int64
	for len(out) < limit {
		seg := s.segmentOf(s.read.Segment)
		if seg == nil {
			return out, nil
		}
		if s.read.Offset >= seg.size {
			if seg == s.segs[len(s.segs)-1] {
				return out, nil
			}
			s.read = Position{Segment: s.nextSeq(seg.seq)}
			continue
		}
		// Enough of the segment for the records asked for (by the
		// segment's average record), not all of it: a backlog is read
		// batch by batch.
		rest := seg.size - s.read.Offset
		want := min(maxBytes-size, seg.size/max(seg.records, 1)*int64(limit-len(out))*5/4) + frameHeader*int64(limit-len(out))
		want = min(max(want, readChunk), rest)
		// The file is read without mu: appends go on meanwhile. Only a
		// segment dropped for room moves s.read under this reader.
		pos := s.read
		s.mu.Unlock()
		buf, err := s.readAt(seg, pos.Offset, want)
		if n, ok := frameLen(buf); err == nil && ok && n > int64(len(buf)) && n <= rest {
			// One record larger than the chunk: read it whole.
			buf, err = s.readAt(seg, pos.Offset, n)
		}
		s.mu.Lock()
		if s.read != pos {
			continue // dropped meanwhile: on from where reading is now
		}
		if err != nil {
			return out, err
		}
		more := int64(len(buf)) < rest // the segment goes on past buf
		off := 0
		for off < len(buf) && len(out) < limit && (len(out) == 0 || size < maxBytes) {
			fr, n, ok := decodeFrame(buf[off:])
			if !ok {
				if fl, hdr := frameLen(buf[off:]); more && off > 0 && (!hdr || fl > int64(len(buf)-off)) {
					break // the frame goes on past buf: the next round reads it
				}
				return out, fmt.Errorf("spool: segment %d corrupt at offset %d", seg.seq, s.read.Offset+int64(off))
			}
			off += n
			size += int64(len(fr.data))
			out = append(out, Entry{Data: fr.data, Appended: fr.appended,
				Next: Position{Segment: seg.seq, Offset: s.read.Offset + int64(off)}})
		}
		s.read.Offset += int64(off)
		s.readSince += int64(len(out)) - counted
		counted = int64(len(out))
		if len(out) > 0 && size >= maxBytes {
			return out, nil
		}
	}
	return out, nil
}

// readAt reads n bytes of seg from off, into a buffer of their own: a
// sink's client may still hold records of a batch it failed to send.
// It needs no lock: it opens the file by seg's sequence number.
func (s *Spool) readAt(seg *segment, off, n int64) ([]byte, error) {
	f, err := os.Open(s.path(seg.seq))
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	return buf, nil
}

// Rewind makes the next Read start again at the oldest unacknowledged
// record: what a reader does after a send failed.
func (s *Spool) Rewind() {
	s.mu.Lock()
	s.read = s.acked
	s.readSince, s.readExact = 0, true
	s.mu.Unlock()
}

// Ack records that every record before p (an Entry's Next) reached the
// sink; segments wholly before p are deleted. The cursor file is written
// before Ack returns (a killed process does not send those records
// again) and synced to the disk with the next Sync.
func (s *Spool) Ack(p Position) {
	if !s.ack(p) {
		return
	}
	// Written now, so that a process killed after this ack does not send
	// the records again; made durable with the next Sync. Without mu: a
	// later Ack or Sync writes the cursor as it is then, never older.
	s.cmu.Lock()
	s.mu.Lock()
	acked := s.acked
	s.mu.Unlock()
	_ = s.writeCursor(acked, false)
	s.cmu.Unlock()
}

// ack moves the cursor to p in memory; false when it is there already.
func (s *Spool) ack(p Position) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.acked.Less(p) {
		return false
	}
	if p == s.read && s.readExact {
		// Everything read is acknowledged: Read counted it.
		s.unsent -= s.readSince
	} else {
		s.unsent -= s.countAcked(p)
	}
	s.readSince, s.readExact = 0, p == s.read
	s.acked = p
	s.ackDirty = true
	for len(s.segs) > 1 && s.segs[0].seq < p.Segment {
		old := s.segs[0]
		_ = os.Remove(s.path(old.seq))
		s.segs = s.segs[1:]
		s.bytes -= old.size
	}
	if s.read.Less(p) {
		s.read = p
	}
	return true
}

// countAcked counts the records from acked to p from the disk.
func (s *Spool) countAcked(p Position) int64 {
	var n int64
	for _, seg := range s.segs {
		if seg.seq < s.acked.Segment || seg.seq > p.Segment {
			continue
		}
		from := int64(0)
		if seg.seq == s.acked.Segment {
			from = s.acked.Offset
		}
		to := seg.size
		if seg.seq == p.Segment {
			to = p.Offset
		}
		n += s.countBetween(seg, from, to)
	}
	return n
}

// countBetween counts seg's records between offsets from and to.
func (s *Spool) countBetween(seg *segment, from, to int64) int64 {
	if from == 0 && to == seg.size {
		return seg.records
	}
	if to <= from {
		return 0
	}
	f, err := os.Open(s.path(seg.seq))
	if err != nil {
		return 0
	}
	defer f.Close()
	buf := make([]byte, to-from)
	if _, err := f.ReadAt(buf, from); err != nil {
		return 0
	}
	var n int64
	for off := 0; off < len(buf); {
		_, k, ok := decodeFrame(buf[off:])
		if !ok {
			break
		}
		off += k
		n++
	}
	return n
}

func (s *Spool) segmentOf(seq uint64) *segment {
	for _, seg := range s.segs {
		if seg.seq == seq {
			return seg
		}
	}
	if len(s.segs) > 0 && seq < s.segs[0].seq {
		return s.segs[0]
	}
	return nil
}

func (s *Spool) nextSeq(seq uint64) uint64 {
	for _, seg := range s.segs {
		if seg.seq > seq {
			return seg.seq
		}
	}
	return seq + 1
}

// Sync makes the records appended and the cursor acknowledged so far
// survive a power loss. The fsyncs run without mu: appends go on
// meanwhile.
func (s *Spool) Sync() error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.mu.Lock()
	if s.closed {
		// Close synced.
		s.mu.Unlock()
		return nil
	}
	w, dirty, ackDirty, acked := s.w, s.dirty, s.ackDirty, s.acked
	s.dirty, s.ackDirty = false, false
	s.mu.Unlock()
	if dirty {
		// A segment finished meanwhile was synced before it was closed.
		if err := w.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
			s.mu.Lock()
			s.dirty = true
			s.mu.Unlock()
			return fmt.Errorf("spool: %w", err)
		}
	}
	if ackDirty {
		if err := s.writeCursor(acked, true); err != nil {
			s.mu.Lock()
			s.ackDirty = true
			s.mu.Unlock()
			return err
		}
	}
	return nil
}

// syncLocked is Sync with cmu and mu held, for Close.
func (s *Spool) syncLocked() error {
	if s.dirty && s.w != nil {
		if err := s.w.Sync(); err != nil {
			return fmt.Errorf("spool: %w", err)
		}
		s.dirty = false
	}
	if s.ackDirty {
		if err := s.writeCursor(s.acked, true); err != nil {
			return err
		}
		s.ackDirty = false
	}
	return nil
}

// Unsent is the number of records not acknowledged: Stats without the
// age of the oldest, which may read the disk.
func (s *Spool) Unsent() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsent
}

// Stats returns the spool's state.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Bytes: s.bytes, Unsent: s.unsent, Dropped: s.dropped, Cut: s.cut}
	if s.unsent > 0 {
		st.OldestUnsent = s.oldestUnsent()
	}
	return st
}

// oldestUnsent is the append time of the record at the cursor.
func (s *Spool) oldestUnsent() time.Time {
	seg := s.segmentOf(s.acked.Segment)
	for seg != nil && s.acked.Segment == seg.seq && s.acked.Offset >= seg.size {
		seg = s.segmentOf(s.nextSeq(seg.seq))
		if seg != nil && seg.records > 0 {
			return seg.first
		}
	}
	if seg == nil {
		return time.Time{}
	}
	if s.acked.Segment != seg.seq || s.acked.Offset == 0 {
		return seg.first
	}
	f, err := os.Open(s.path(seg.seq))
	if err != nil {
		return seg.first
	}
	defer f.Close()
	var hdr [frameHeader]byte
	if _, err := f.ReadAt(hdr[:], s.acked.Offset); err != nil {
		return seg.first
	}
	return frameTime(hdr[:])
}

// Close syncs and closes the spool.
func (s *Spool) Close() error {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for s.writing {
		// The write in flight, and a group it hands over to, which
		// fails as closed.
		s.idle.Wait()
	}
	err := s.syncLocked()
	if cerr := s.w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("spool: %w", cerr)
	}
	return err
}

// readCursor reads the acknowledged position; none (a new spool, or an
// unreadable cursor, whose records are then sent again) is the start.
func (s *Spool) readCursor() Position {
	b, err := os.ReadFile(filepath.Join(s.opts.Dir, cursorFile))
	if err != nil {
		return Position{}
	}
	var p Position
	if _, err := fmt.Sscanf(string(b), "%d %d\n", &p.Segment, &p.Offset); err != nil || p.Offset < 0 {
		return Position{}
	}
	return p
}

// writeCursor replaces the cursor file with acked at once (a rename),
// synced to the disk when durable; cmu held.
func (s *Spool) writeCursor(acked Position, durable bool) error {
	path := filepath.Join(s.opts.Dir, cursorFile)
	tmp := path + ".next"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	_, err = fmt.Fprintf(f, "%d %d\n", acked.Segment, acked.Offset)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("spool: cursor: %w", err)
	}
	return nil
}
