package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/svc-dev/svc/internal/jsonmask"
)

// Destinations with a special meaning for Open; anything else is a file
// path.
const (
	Stdout = "stdout"
	Stderr = "stderr"
	// Off turns the audit log off, as does the empty destination.
	Off = "off"
)

// Defaults of Options.
const (
	DefaultQueueSize     = 4096
	DefaultFlushInterval = time.Second
)

// batchSize is how many encoded bytes the writer gathers before it writes
// them out even though more records are waiting.
const batchSize = 64 << 10

// Options tunes a Logger. The zero value is usable.
type Options struct {
	// QueueSize bounds the records waiting to be written; a record logged
	// while the queue is full is dropped. Default DefaultQueueSize.
	QueueSize int
	// FlushInterval bounds how long a record may wait in the writer
	// before it is written; the writer waits at most 5ms anyway, to gather
	// the records that arrive meanwhile into one write. Default
	// DefaultFlushInterval.
	FlushInterval time.Duration
	// Logger receives write errors (never record contents). Default
	// slog.Default().
	Logger *slog.Logger
	// MaxSizeMB rotates a file destination before a write would take it
	// past this many megabytes: the file is renamed with a timestamp
	// (audit-2026-11-23T21-40-01.123.log) and a new one is started. The
	// writer goroutine rotates, so a decision never waits for it. 0 never
	// rotates.
	MaxSizeMB int
	// MaxBackups is how many rotated files are kept, the oldest removed
	// first; 0 keeps them all.
	MaxBackups int
	// Mask erases JSON pointers from every record before it is written
	// (decision_log.mask), listing those that erased something in the
	// record's "erased"; the writer goroutine applies it. A record the
	// mask cannot be applied to is not written and counts as Failed.
	// Nil writes records as they are.
	Mask *jsonmask.Mask
}

func (o *Options) setDefaults() {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Stats are the counters of a Logger. Every record given to Log ends up in
// exactly one of Written, Dropped and Failed, or is still queued.
type Stats struct {
	// Written counts records handed to the destination without error.
	Written uint64 `json:"written"`
	// Dropped counts records discarded because the queue was full, the
	// logger was closed, or Close gave up waiting for them.
	Dropped uint64 `json:"dropped"`
	// Failed counts records lost to write errors of the destination.
	Failed uint64 `json:"failed"`
	// QueueLen is the number of records waiting to be written.
	QueueLen int `json:"queue_len"`
	// QueueCap is the queue's capacity.
	QueueCap int `json:"queue_cap"`
}

// Logger writes audit records as JSON lines from a single goroutine. Its
// methods are safe for concurrent use; the methods of a nil *Logger and of
// a disabled one (see Open) do nothing.
type Logger struct {
	// mu orders Log's send against Close's channel close: Log sends under
	// the read lock, Close closes under the write lock.
	mu     sync.RWMutex
	closed bool
	queue  chan queued

	closeOnce sync.Once
	abortOnce sync.Once
	abort     chan struct{} // closed when Close gives up waiting
	done      chan struct{} // closed when the writer goroutine has exited
	closeErr  error         // set by the writer before done is closed

	out        io.Writer
	file       io.Closer // closed by the writer on exit; nil unless Open created it
	log        *slog.Logger
	flushEvery time.Duration
	mask       *jsonmask.Mask

	written, dropped, failed atomic.Uint64
}

// New returns a Logger writing to w and starts its writer goroutine. The
// caller keeps ownership of w: Close does not close it.
func New(w io.Writer, opts Options) *Logger {
	return start(w, nil, opts)
}

// CheckDestination reports what Open refuses in a destination without
// opening it: a log file whose directory does not exist or is not a
// directory.
func CheckDestination(destination string) error {
	switch destination {
	case "", Off, Stdout, Stderr:
		return nil
	}
	dir := filepath.Dir(destination)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("audit: directory %q of the log file does not exist", dir)
	case err != nil:
		return fmt.Errorf("audit: log file directory: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("audit: %q is not a directory", dir)
	}
	return nil
}

// Open returns a Logger for a destination: "stdout", "stderr", a file path
// (opened for appending, created with mode 0600; its directory must exist),
// or "" or "off" for a disabled Logger whose Log does nothing.
func Open(destination string, opts Options) (*Logger, error) {
	switch destination {
	case "", Off:
		return &Logger{}, nil
	case Stdout:
		return start(os.Stdout, nil, opts), nil
	case Stderr:
		return start(os.Stderr, nil, opts), nil
	}
	if err := CheckDestination(destination); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(destination, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open log file: %w", err)
	}
	if opts.MaxSizeMB > 0 {
		// The file was opened to report a bad path now rather than at the
		// first write; lumberjack reopens it (keeping its mode) and
		// rotates it.
		f.Close()
		r := &lumberjack.Logger{Filename: destination, MaxSize: opts.MaxSizeMB, MaxBackups: opts.MaxBackups}
		return start(r, r, opts), nil
	}
	return start(f, f, opts), nil
}

func start(w io.Writer, c io.Closer, opts Options) *Logger {
	opts.setDefaults()
	l := &Logger{
		queue:      make(chan queued, opts.QueueSize),
		abort:      make(chan struct{}),
		done:       make(chan struct{}),
		out:        w,
		file:       c,
		log:        opts.Logger,
		flushEvery: opts.FlushInterval,
		mask:       opts.Mask,
	}
	go l.run()
	return l
}

// Enabled reports whether records are written at all.
func (l *Logger) Enabled() bool { return l != nil && l.queue != nil }

// Log queues r for writing and returns at once. When the queue is full, or
// the Logger is closed, r is dropped and counted in Stats.Dropped. A zero
// r.Time is set to the current time.
func (l *Logger) Log(r Record) {
	l.enqueue(queued{rec: r})
}

// LogTraced is Log for a record whose TraceID and SpanID are to be the
// W3C ids trace and span, which are written as hex from their bytes (as
// the fields would be written) unless the record's own fields are set:
// the two strings are never made.
func (l *Logger) LogTraced(r Record, trace [16]byte, span [8]byte) {
	l.enqueue(queued{rec: r, ids: rawIDs{trace: trace, span: span, set: true}})
}

// queued is a record waiting for the writer, with its trace ids as bytes
// (LogTraced).
type queued struct {
	rec Record
	ids rawIDs
}

func (l *Logger) enqueue(q queued) {
	if l == nil || l.queue == nil {
		return
	}
	if q.rec.Time.IsZero() {
		q.rec.Time = time.Now()
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		l.dropped.Add(1)
		return
	}
	select {
	case l.queue <- q:
	default:
		l.dropped.Add(1)
	}
	l.mu.RUnlock()
}

// Stats returns the current counters.
func (l *Logger) Stats() Stats {
	if l == nil || l.queue == nil {
		return Stats{}
	}
	return Stats{
		Written:  l.written.Load(),
		Dropped:  l.dropped.Load(),
		Failed:   l.failed.Load(),
		QueueLen: len(l.queue),
		QueueCap: cap(l.queue),
	}
}

// Close stops accepting records, writes those still queued, flushes, and
// closes the destination file (never stdout, stderr or a writer given to
// New). When ctx ends first, Close returns an error wrapping ctx.Err(); the
// writer then finishes the write in progress, drops what is still queued
// (counted) and closes the file on its own. Close may be called more than
// once; later calls wait for the writer again.
func (l *Logger) Close(ctx context.Context) error {
	if l == nil || l.queue == nil {
		return nil
	}
	l.closeOnce.Do(func() {
		l.mu.Lock()
		l.closed = true
		close(l.queue)
		l.mu.Unlock()
	})
	select {
	case <-l.done:
		return l.closeErr
	case <-ctx.Done():
		l.abortOnce.Do(func() { close(l.abort) })
		return fmt.Errorf("audit: close gave up with %d records queued: %w", len(l.queue), ctx.Err())
	}
}

// linger is how long the writer lets records gather after the first of a
// batch arrives, at most FlushInterval: under load that is one write per
// linger instead of one per record, and the writer is not woken for every
// record.
const linger = 5 * time.Millisecond

// run is the writer goroutine. It waits for a record, lets more gather for
// linger (FlushInterval if shorter), then encodes all that are queued and
// writes them, in chunks of about batchSize.
func (l *Logger) run() {
	defer close(l.done)
	w := writer{Logger: l, batch: make([]byte, 0, batchSize+1024)}
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	for {
		select {
		case r, ok := <-l.queue:
			if w.received(&r, ok) {
				return
			}
		case <-l.abort:
			w.finish(true)
			return
		}
		wait.Reset(min(linger, l.flushEvery))
		select {
		case <-wait.C:
		case <-l.abort:
			wait.Stop()
			w.finish(true)
			return
		}
		for more := true; more; {
			select {
			case r, ok := <-l.queue:
				if w.received(&r, ok) {
					return
				}
			default:
				more = false
			}
		}
		w.flush()
	}
}

// writer is the state owned by the writer goroutine.
type writer struct {
	*Logger
	batch   []byte
	pending uint64 // records in batch
	failing bool   // the last write failed
	lost    uint64 // records lost since failing began
}

// received takes what a receive from the queue gave: q when ok, else
// the queue is closed and received finishes the writer and reports true.
func (w *writer) received(q *queued, ok bool) (closed bool) {
	if !ok {
		w.finish(false)
		return true
	}
	w.add(q)
	return false
}

// add encodes r into the batch, and writes the batch once it reaches
// batchSize.
func (w *writer) add(q *queued) {
	start := len(w.batch)
	w.batch = q.rec.appendJSON(w.batch, &q.ids)
	if !w.mask.Empty() {
		masked, changed, err := w.mask.Apply(w.batch[start:])
		if err != nil {
			w.batch = w.batch[:start]
			w.failed.Add(1)
			w.log.Error("audit record not written: the mask cannot be applied", "error", err)
			return
		}
		if changed {
			w.batch = append(w.batch[:start], masked...)
		}
	}
	w.batch = append(w.batch, '\n')
	w.pending++
	if len(w.batch) >= batchSize {
		w.flush()
	}
}

func (w *writer) flush() {
	if w.pending == 0 {
		return
	}
	_, err := w.out.Write(w.batch)
	n := w.pending
	w.batch, w.pending = w.batch[:0], 0
	if err != nil {
		w.failed.Add(n)
		w.lost += n
		if !w.failing {
			w.failing = true
			w.log.Error("audit log write failed; records are being lost", "error", err, "records", n)
		}
		return
	}
	w.written.Add(n)
	if w.failing {
		w.log.Warn("audit log writes recovered", "records_lost", w.lost)
		w.failing, w.lost = false, 0
	}
}

// finish flushes what is gathered, counts what is still queued as dropped
// when aborted, and closes the file.
func (w *writer) finish(aborted bool) {
	if aborted {
		var n uint64
		for range w.queue {
			n++
		}
		w.dropped.Add(n)
	}
	w.flush()
	if w.file != nil {
		if err := w.file.Close(); err != nil {
			w.closeErr = fmt.Errorf("audit: close log file: %w", err)
		}
	}
}
