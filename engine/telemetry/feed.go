package telemetry

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the in-process feeds.
const (
	// DefaultFeedSize is how many recent records a feed keeps.
	DefaultFeedSize = 4096
	// SubscriberBuffer is how many live records a subscriber may fall
	// behind by before records for it are dropped.
	SubscriberBuffer = 256
)

// feed is a bounded ring buffer of recent records with fan-out to
// subscribers. Publishing never blocks: a subscriber whose channel is full
// misses the record, and the miss is counted.
//
// The ring keeps records as published (S); readers and subscribers get
// them as view makes them (T), only when they ask: a record nobody reads
// costs no conversion.
type feed[S, T any] struct {
	stamp func(*S) time.Time // the time Subscribe's since compares with
	view  func(S) T

	mu     sync.Mutex
	ring   []S
	next   int  // index the next record goes to
	full   bool // ring has wrapped
	subs   map[*subscriber[T]]struct{}
	closed bool

	published atomic.Uint64
	dropped   atomic.Uint64
	// live mirrors len(subs), readable without the lock.
	live atomic.Int64
}

type subscriber[T any] struct {
	ch      chan T
	filter  func(T) bool
	dropped atomic.Uint64
}

// Subscription is one subscriber's view of a feed: C delivers the records
// (closed when the subscription ends) and Dropped counts the records this
// subscriber missed because it fell behind.
type Subscription[T any] struct {
	// C receives the records; it is closed when the subscription ends.
	C <-chan T
	s *subscriber[T]
}

// Dropped is how many records this subscriber missed so far.
func (s *Subscription[T]) Dropped() uint64 { return s.s.dropped.Load() }

// newFeed returns a feed of records kept and delivered as they are.
func newFeed[T any](size int, stamp func(*T) time.Time) *feed[T, T] {
	return newViewFeed(size, stamp, func(r T) T { return r })
}

// newViewFeed returns a feed that keeps records of type S and delivers
// view's T of them.
func newViewFeed[S, T any](size int, stamp func(*S) time.Time, view func(S) T) *feed[S, T] {
	if size <= 0 {
		size = DefaultFeedSize
	}
	return &feed[S, T]{stamp: stamp, view: view, ring: make([]S, size), subs: map[*subscriber[T]]struct{}{}}
}

func (f *feed[S, T]) publish(v S) {
	// The view is made outside the lock when somebody watches, inside
	// only for a subscriber that came meanwhile.
	var t T
	viewed := false
	if f.live.Load() > 0 {
		t, viewed = f.view(v), true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ring[f.next] = v
	f.next++
	if f.next == len(f.ring) {
		f.next, f.full = 0, true
	}
	f.published.Add(1)
	for s := range f.subs {
		if !viewed {
			t, viewed = f.view(v), true
		}
		if s.filter != nil && !s.filter(t) {
			continue
		}
		select {
		case s.ch <- t:
		default:
			f.dropped.Add(1)
			s.dropped.Add(1)
		}
	}
}

// recentLocked returns the buffered records, oldest first, that match
// filter and are stamped at or after since.
func (f *feed[S, T]) recentLocked(filter func(T) bool, since time.Time) []T {
	var out []T
	visit := func(part []S) {
		for i := range part {
			if f.stamp(&part[i]).Before(since) {
				continue
			}
			if t := f.view(part[i]); filter == nil || filter(t) {
				out = append(out, t)
			}
		}
	}
	if f.full {
		visit(f.ring[f.next:])
	}
	visit(f.ring[:f.next])
	return out
}

func (f *feed[S, T]) recent(filter func(T) bool, since time.Time) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.recentLocked(filter, since)
}

// subscribe returns a channel that first receives the buffered records
// matching filter since since, then live ones, until ctx ends or the feed
// is closed; then the channel is closed.
func (f *feed[S, T]) subscribe(ctx context.Context, filter func(T) bool, since time.Time) <-chan T {
	return f.watch(ctx, filter, since).C
}

// watch is subscribe returning the Subscription with its drop count.
func (f *feed[S, T]) watch(ctx context.Context, filter func(T) bool, since time.Time) *Subscription[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	backlog := f.recentLocked(filter, since)
	s := &subscriber[T]{ch: make(chan T, len(backlog)+SubscriberBuffer), filter: filter}
	for _, v := range backlog {
		s.ch <- v
	}
	sub := &Subscription[T]{C: s.ch, s: s}
	if f.closed || ctx.Err() != nil {
		close(s.ch)
		return sub
	}
	f.subs[s] = struct{}{}
	f.live.Add(1)
	context.AfterFunc(ctx, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.subs[s]; ok {
			delete(f.subs, s)
			f.live.Add(-1)
			close(s.ch)
		}
	})
	return sub
}

// close ends every subscription; records published later are still kept
// in the ring.
func (f *feed[S, T]) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for s := range f.subs {
		delete(f.subs, s)
		f.live.Add(-1)
		close(s.ch)
	}
}

// FeedStats are the counters of a span or log feed.
type FeedStats struct {
	// Published counts records that entered the feed.
	Published uint64 `json:"published"`
	// Dropped counts records a slow subscriber missed.
	Dropped uint64 `json:"dropped"`
	// Buffered is how many recent records are kept.
	Buffered int `json:"buffered"`
	// Subscribers is the number of live subscriptions.
	Subscribers int `json:"subscribers"`
}

func (f *feed[S, T]) stats() FeedStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.next
	if f.full {
		n = len(f.ring)
	}
	return FeedStats{
		Published:   f.published.Load(),
		Dropped:     f.dropped.Load(),
		Buffered:    n,
		Subscribers: len(f.subs),
	}
}
