// Package decisionlog ships decision records off the sidecar with
// nothing lost: each record is appended to an on-disk spool (package
// spool) before the decision's answer leaves, and a shipper sends the
// spool's records to a sink in batches, acknowledging them in the spool
// only once the sink has. Records reach the sink at least once through
// the sink's outages and the process's death; a sink that de-duplicates
// by decision id (NATS JetStream's Nats-Msg-Id) makes it exactly once.
package decisionlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/internal/periodic"
	"github.com/svc-dev/svc/internal/warnevery"
)

// Record is one decision record as the sinks carry it: the decision id
// (NATS's message id, the de-duplication key everywhere), the tenant
// (Kafka's message key) and the record as JSON.
type Record struct {
	DecisionID string
	Tenant     string
	JSON       []byte
}

// Sink delivers batches of records. Send returns nil only once the sink
// has taken every record of the batch (a JetStream ack, a Kafka produce
// ack, a 2xx); on an error the whole batch is sent again later, so a
// sink may see a record more than once. Once Send has returned nil the
// sink keeps nothing of the batch: the next batch reuses its memory.
type Sink interface {
	// Name is the sink's kind ("nats", "kafka", "otlp", "http").
	Name() string
	Send(ctx context.Context, batch []Record) error
	Close() error
}

// Options configure a Logger.
type Options struct {
	// Spool is where records wait; see spool.Options. Its Dir is the
	// root of the process's own spool, a locked directory below it, so
	// that a sidecar handing over to its next process never shares one;
	// the spools of processes gone (unlocked) are adopted and shipped.
	Spool spool.Options
	// FsyncInterval is how often the spool is synced to disk (default
	// 1s): a power loss loses at most that window.
	FsyncInterval time.Duration
	// BatchMaxRecords bounds a batch (default 500).
	BatchMaxRecords int
	// FlushInterval is how long the shipper waits for more records
	// before sending a batch that is not full (default 1s).
	FlushInterval time.Duration
	// Logger receives warnings about the sink; default discards.
	Logger *slog.Logger
}

// Logger spools records and ships them to its sink.
type Logger struct {
	opts  Options
	spool *spool.Spool
	own   *lockedDir
	// orphans are the spools of processes gone, shipped then removed.
	orphans []*orphan
	sink    Sink
	// limiter is sink's bound on a record, when it has one.
	limiter RecordLimiter
	log     *slog.Logger
	wake    chan struct{}

	shipped, retries atomic.Int64
	// oversized counts the spooled records dropped unsent because the
	// sink takes none so large, even without its input.
	oversized atomic.Int64
	// refused counts the records the spool refused; lastRefused is when
	// the latest was (Unix nanoseconds).
	refused, lastRefused atomic.Int64
	// refusalWarned spaces the warnings about refused records.
	refusalWarned warnevery.Gate
	// connected is false from a failed send until one succeeds: a sink
	// that has not failed yet is not disconnected.
	connected atomic.Bool
	// failing: the last batch failed other than by the Logger's stop.
	failing atomic.Bool
	mu      sync.Mutex
	lastErr string
}

// Stats is a Logger's state, as /v1/status shows it.
type Stats struct {
	Sink            string
	Connected       bool
	SpoolBytes      int64
	Unsent          int64
	OldestUnsentAge time.Duration
	Shipped         int64
	Retries         int64
	// Dropped counts the records lost unsent: deleted by a full spool
	// (the drop_oldest overflow), skipped as corrupt when a spool was
	// opened, or larger than the sink takes even without their input.
	Dropped int64
	// Refused counts the records the spool refused since the start
	// (full under the deny overflow, or not writable): their decisions
	// were answered decision-log-unavailable instead.
	Refused int64
	// Refusing: a record was refused within the last RefusalHold.
	Refusing  bool
	LastError string
}

// RefusalHold is how long Stats says Refusing after the latest refusal:
// a sidecar refusing now and then is reported as refusing throughout,
// not only in the instant of each refusal.
const RefusalHold = time.Minute

// refusalWarnEvery spaces the warnings about refused records, so that a
// full spool does not write one line per decision.
const refusalWarnEvery = 30 * time.Second

// New opens the spool in opts.Spool.Dir: records a previous process left
// unsent are shipped first.
func New(opts Options, sink Sink) (*Logger, error) {
	if sink == nil {
		return nil, errors.New("decisionlog: no sink")
	}
	if opts.FsyncInterval <= 0 {
		opts.FsyncInterval = time.Second
	}
	if opts.BatchMaxRecords <= 0 {
		opts.BatchMaxRecords = 500
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	own, orphans, err := claimDirs(opts.Spool.Dir)
	if err != nil {
		return nil, fmt.Errorf("decisionlog: %w", err)
	}
	l := &Logger{opts: opts, own: own, sink: sink, log: opts.Logger, wake: make(chan struct{}, 1)}
	l.limiter, _ = sink.(RecordLimiter)
	l.connected.Store(true)
	so := opts.Spool
	so.Dir = own.path
	if so.Logger == nil {
		so.Logger = l.log
	}
	if l.spool, err = spool.Open(so); err != nil {
		own.release()
		releaseAll(orphans)
		return nil, fmt.Errorf("decisionlog: %w", err)
	}
	for _, d := range orphans {
		so.Dir = d.path
		sp, err := spool.Open(so)
		if err != nil {
			l.log.Error("decision log: the spool of a previous process cannot be read; it is left in place", "dir", d.path, "err", err)
			d.release()
			continue
		}
		l.orphans = append(l.orphans, &orphan{dir: d, spool: sp})
	}
	return l, nil
}

// finalFlush bounds the last batches a stopping Logger sends.
const finalFlush = 2 * time.Second

// orphan is the spool of a process gone.
type orphan struct {
	dir   *lockedDir
	spool *spool.Spool
	// removed: shipped, and its directory removed. Only what it lost
	// still counts in Stats; its bytes are no longer on disk.
	removed atomic.Bool
}

// ErrFull is Log's refusal when the spool is full under the deny
// overflow: the decision must not be answered unlogged.
var ErrFull = spool.ErrFull

// ErrTooLarge is Log's refusal of a record larger than a spool segment
// or than the sink takes (RecordLimiter). It is not counted as refused:
// its caller logs the decision again without its input, and counts a
// refusal (CountRefusal) only if that fails too.
var ErrTooLarge = spool.ErrTooLarge

// Log appends r to the spool; when Log returns nil the record is on disk
// and will be shipped. Under the deny overflow a full spool refuses it
// (ErrFull).
func (l *Logger) Log(r Record) error {
	bp := encodeBufs.Get().(*[]byte)
	*bp = append(AppendHead((*bp)[:0], r.DecisionID, r.Tenant), r.JSON...)
	err := l.LogEncoded(*bp)
	if cap(*bp) <= 64<<10 {
		encodeBufs.Put(bp)
	}
	return err
}

// LogEncoded is Log of a record encoded by its caller: AppendHead's
// bytes followed by the record's JSON, built in one buffer, which the
// spool copies before LogEncoded returns.
func (l *Logger) LogEncoded(rec []byte) error {
	if l.limiter != nil {
		// rec's head (decision id and tenant) counts too: the sink's
		// message carries them beside the JSON.
		if n := l.limiter.MaxRecordBytes(); n > 0 && len(rec) > n {
			return ErrTooLarge
		}
	}
	if err := l.spool.Append(rec); err != nil {
		if !errors.Is(err, ErrTooLarge) {
			l.refuse(err)
		}
		return err
	}
	// Unsent, not Stats: Log runs once per decision, and Stats may read
	// the disk for the age of the oldest record.
	if l.spool.Unsent() >= int64(l.opts.BatchMaxRecords) {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
	return nil
}

// CountRefusal counts a record that could not be logged in any form
// (err; see ErrTooLarge): its decision was answered
// decision-log-unavailable.
func (l *Logger) CountRefusal(err error) { l.refuse(err) }

// refuse counts a record the spool refused (err), and says so in a
// warning at most every refusalWarnEvery: every decision is refused
// meanwhile, which must not go unnoticed.
func (l *Logger) refuse(err error) {
	n := l.refused.Add(1)
	now := time.Now()
	l.lastRefused.Store(now.UnixNano())
	if !l.refusalWarned.Allow(now, refusalWarnEvery) {
		return
	}
	l.log.Warn("decision log spool refuses records; their decisions are answered decision-log-unavailable",
		"err", err, "refused", n, "next_warning_in", refusalWarnEvery.String())
}

// Run ships records and syncs the spool until ctx ends, then syncs and
// closes the spool and the sink. Records not shipped by then wait in the
// spool for the next process.
func (l *Logger) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic.Every(ctx, l.opts.FsyncInterval, func() {
			if err := l.spool.Sync(); err != nil {
				l.log.Error("decision log spool sync failed", "err", err)
			}
		})
	}()
	// What previous processes left goes first, oldest records first.
	for _, o := range l.orphans {
		l.ship(ctx, o.spool, true)
		empty := o.spool.Stats().Unsent == 0
		_ = o.spool.Close()
		if empty {
			// Counted out before the directory goes, so that whoever
			// sees it gone sees its bytes gone from Stats too.
			o.removed.Store(true)
			o.dir.remove()
		} else {
			o.dir.release()
		}
	}
	l.ship(ctx, l.spool, false)
	if !l.failing.Load() {
		// Stopping: the records waiting for a batch to fill go now,
		// unless the sink was failing, within a bound; what is left
		// waits in the spool for the next process.
		fctx, cancel := context.WithTimeout(context.Background(), finalFlush)
		l.ship(fctx, l.spool, true)
		cancel()
	}
	<-done
	err := l.spool.Close()
	l.own.release()
	if cerr := l.sink.Close(); err == nil {
		err = cerr
	}
	return err
}

// ship sends sp's batches, backing off while the sink fails. Unless it
// drains (then it returns once sp is empty), it sends a batch when
// BatchMaxRecords records wait or at the flush interval, whichever comes
// first: under load every batch is full, and the costs of a batch (the
// sink's round trip, the cursor file, waking up) are shared by that many
// records. The records wait on disk meanwhile.
func (l *Logger) ship(ctx context.Context, sp *spool.Spool, drain bool) {
	backoff := 100 * time.Millisecond
	flush := time.NewTicker(l.opts.FlushInterval)
	defer flush.Stop()
	// retry: the last batch failed and is sent again after the backoff,
	// not at the next flush.
	retry := false
	// The memory of a batch the sink took is the next batch's: the
	// records read, as the spool's Batch, and the slice of them.
	read := new(spool.Batch)
	var batch []Record
	for ctx.Err() == nil {
		if !drain && !retry {
			if l.waitBatch(ctx, sp, flush.C); ctx.Err() != nil {
				return
			}
		}
		retry = false
		es, err := sp.Read(read, l.opts.BatchMaxRecords, 4<<20)
		if err != nil {
			l.log.Error("decision log spool unreadable", "err", err)
		}
		if len(es) == 0 {
			if drain {
				return
			}
			continue
		}
		batch = batch[:0]
		for _, e := range es {
			if r, ok := l.fit(decode(e.Data)); ok {
				batch = append(batch, r)
			}
		}
		if err := l.send(ctx, batch); err != nil {
			// The sink's client may still hold the records (a Kafka
			// produce timed out): their memory is left to it.
			read, batch = new(spool.Batch), nil
			sp.Rewind()
			l.failing.Store(ctx.Err() == nil)
			l.retries.Add(1)
			l.setErr(err)
			if l.connected.Swap(false) {
				l.log.Warn("decision log sink unavailable; records wait in the spool", "sink", l.sink.Name(), "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			retry = true
			continue
		}
		backoff = 100 * time.Millisecond
		l.failing.Store(false)
		if !l.connected.Swap(true) {
			l.setErr(nil)
		}
		// Counted before the spool says unsent 0, so that whoever sees
		// nothing left unsent sees every record shipped.
		l.shipped.Add(int64(len(batch)))
		sp.Ack(es[len(es)-1].Next)
	}
}

// send sends batch to the sink; a batch of records all dropped
// (Logger.fit) is done at once.
func (l *Logger) send(ctx context.Context, batch []Record) error {
	if len(batch) == 0 {
		return nil
	}
	return l.sink.Send(ctx, batch)
}

// fit is r as the sink takes it: a record larger than the sink's bound
// (spooled before the bound was known, or by a process whose sink took
// larger ones) goes without its input, or is dropped, counted and
// logged, when even that is too large; either way the records behind it
// are not held up.
func (l *Logger) fit(r Record, ok bool) (Record, bool) {
	if !ok || l.limiter == nil {
		return r, ok
	}
	n := l.limiter.MaxRecordBytes()
	if n <= 0 || len(r.JSON) <= n {
		return r, true
	}
	size := len(r.JSON)
	if small, ok := withoutInput(r.JSON); ok && len(small) <= n {
		l.log.Warn("decision record larger than the sink takes; it is sent without its input",
			"decision_id", r.DecisionID, "bytes", size, "sink_max_bytes", n)
		r.JSON = small
		return r, true
	}
	l.oversized.Add(1)
	l.log.Error("decision record larger than the sink takes, even without its input; it is dropped",
		"decision_id", r.DecisionID, "bytes", size, "sink_max_bytes", n)
	return Record{}, false
}

// waitBatch returns once sp holds a full batch, at the next flush tick,
// or when ctx ends. A wake-up from Log is checked against the count: one
// sent while the last batch was in flight counted that batch too.
func (l *Logger) waitBatch(ctx context.Context, sp *spool.Spool, flush <-chan time.Time) {
	for sp.Unsent() < int64(l.opts.BatchMaxRecords) {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		case <-flush:
			return
		}
	}
}

func (l *Logger) setErr(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastErr = ""
	if err != nil {
		l.lastErr = err.Error()
	}
}

// Stats returns the Logger's state.
func (l *Logger) Stats() Stats {
	// Records skipped as corrupt at Open were lost unsent, as dropped
	// ones are.
	st := l.spool.Stats()
	st.Dropped += st.Skipped + l.oversized.Load()
	for _, o := range l.orphans {
		// Closed once shipped: its last stats stay.
		os := o.spool.Stats()
		st.Dropped += os.Dropped + os.Skipped
		if o.removed.Load() {
			continue
		}
		st.Bytes += os.Bytes
		st.Unsent += os.Unsent
		if !os.OldestUnsent.IsZero() && (st.OldestUnsent.IsZero() || os.OldestUnsent.Before(st.OldestUnsent)) {
			st.OldestUnsent = os.OldestUnsent
		}
	}
	l.mu.Lock()
	lastErr := l.lastErr
	l.mu.Unlock()
	s := Stats{
		Sink: l.sink.Name(), Connected: l.connected.Load(), SpoolBytes: st.Bytes, Unsent: st.Unsent,
		Shipped: l.shipped.Load(), Retries: l.retries.Load(), Dropped: st.Dropped, LastError: lastErr,
		Refused: l.refused.Load(),
	}
	if last := l.lastRefused.Load(); last != 0 && time.Since(time.Unix(0, last)) < RefusalHold {
		s.Refusing = true
	}
	if !st.OldestUnsent.IsZero() {
		s.OldestUnsentAge = time.Since(st.OldestUnsent)
	}
	return s
}

// encodeBufs are Log's buffers, spared an allocation per decision.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// AppendHead appends to b what precedes a record's JSON in the spool:
// the decision id and the tenant, each with its length.
func AppendHead(b []byte, decisionID, tenant string) []byte {
	b = binary.AppendUvarint(b, uint64(len(decisionID)))
	b = append(b, decisionID...)
	b = binary.AppendUvarint(b, uint64(len(tenant)))
	return append(b, tenant...)
}

// decode reverses AppendHead and the JSON after it; false for data
// that is not such a record.
func decode(b []byte) (Record, bool) {
	var r Record
	var ok bool
	if r.DecisionID, b, ok = field(b); !ok {
		return Record{}, false
	}
	if r.Tenant, b, ok = field(b); !ok {
		return Record{}, false
	}
	r.JSON = b
	return r, true
}

// field reads a length-prefixed string. It shares b's memory: the
// spool reads a batch into memory that nothing writes to again until the
// sink has taken the batch (ship reads the next one into new memory when
// the sink failed), so the string stays as it is for as long as a sink
// holds it.
func field(b []byte) (string, []byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, false
	}
	if n == 0 {
		return "", b[k:], true
	}
	return unsafe.String(&b[k], int(n)), b[k+int(n):], true
}
