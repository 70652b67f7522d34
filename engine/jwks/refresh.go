package jwks

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// firstRetry is the first delay after a failed background fetch; it
// doubles with each further failure up to MinRefresh.
const firstRetry = time.Second

// Run keeps the set fresh until ctx ends, then returns nil. It fetches at
// once, then again after the interval the provider announced (Cache-Control
// max-age clamped to [MinRefresh, MaxRefresh]). After a failure it retries
// with jittered exponential backoff bounded by MinRefresh while the keys
// already loaded keep serving. Run must not be called twice at once. When
// it returns no fetch is under way: the one in flight is cancelled and
// waited for.
func (c *Cache) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("jwks: cache is already running")
	}
	defer c.running.Store(false)
	defer c.setNext(time.Time{})
	life, end := context.WithCancel(ctx)
	run := &runState{ctx: life}
	c.runMu.Lock()
	c.run = run
	c.runMu.Unlock()
	defer func() {
		c.runMu.Lock()
		c.run = nil
		c.runMu.Unlock()
		end()
		run.flights.Wait()
	}()

	failures := 0
	for {
		interval, err := c.backgroundFetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := interval
		if err != nil {
			failures++
			wait = backoff(failures, c.opts.MinRefresh)
		} else {
			failures = 0
		}
		c.setNext(c.opts.Now().Add(wait))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// backgroundFetch fetches outside the unknown-kid limiter, sharing the
// flight with any on-demand fetch already under way.
func (c *Cache) backgroundFetch(ctx context.Context) (time.Duration, error) {
	ch := c.group.DoChan("fetch", func() (any, error) {
		return c.flight(ctx)
	})
	select {
	case r := <-ch:
		if errors.Is(r.Err, errRateLimited) {
			// Joined an on-demand flight that the limiter refused; the
			// schedule is not subject to that limit.
			return c.flight(ctx)
		}
		d, _ := r.Val.(time.Duration)
		return d, r.Err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (c *Cache) setNext(t time.Time) {
	c.mu.Lock()
	c.st.NextRefresh = t
	c.mu.Unlock()
}

// backoff returns the delay before retry number n (1-based): firstRetry
// doubled per failure, capped at limit, with the upper half jittered so
// that many sidecars do not retry in step.
func backoff(n int, limit time.Duration) time.Duration {
	d := min(firstRetry, limit)
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}

// bucket is a token bucket: up to burst tokens, refilled at burst per
// interval. It bounds the fetches that unknown kids may cause.
type bucket struct {
	mu       sync.Mutex
	tokens   float64
	burst    float64
	perNanos float64
	last     time.Time
}

func newBucket(burst int, interval time.Duration, now time.Time) *bucket {
	return &bucket{
		tokens:   float64(burst),
		burst:    float64(burst),
		perNanos: float64(burst) / float64(interval),
		last:     now,
	}
}

// allow takes a token if one is left at time now.
func (b *bucket) allow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(b.burst, b.tokens+float64(elapsed)*b.perNanos)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
