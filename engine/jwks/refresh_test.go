package jwks_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/internal/testkit"
)

// runCache starts Run in the background and stops it when the test ends.
func runCache(t *testing.T, c *jwks.Cache) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after cancel, want nil", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
}

// waitRequests waits until the IdP has seen n requests and returns their
// arrival times.
func waitRequests(t *testing.T, p *idp, n int, limit time.Duration) []time.Time {
	t.Helper()
	var ts []time.Time
	testkit.Poll(t, limit, fmt.Sprintf("the IdP to see %d requests", n), func() (bool, string) {
		ts = p.RequestTimes()
		return len(ts) >= n, fmt.Sprintf("%d requests", len(ts))
	})
	return ts
}

func TestRunRefreshInterval(t *testing.T) {
	k := keys()
	tests := []struct {
		name         string
		cacheControl string
		min, max     time.Duration
		wantGap      time.Duration // expected gap between background fetches
	}{
		{"max-age honoured", "public, max-age=1", 10 * time.Millisecond, time.Hour, time.Second},
		{"max-age clamped to max", "max-age=3600", 50 * time.Millisecond, 200 * time.Millisecond, 200 * time.Millisecond},
		{"max-age raised to min", "max-age=0", 300 * time.Millisecond, time.Hour, 300 * time.Millisecond},
		{"no cache-control uses min", "", 150 * time.Millisecond, time.Hour, 150 * time.Millisecond},
		{"no-store uses min", "no-store, max-age=60", 150 * time.Millisecond, time.Hour, 150 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newIDP(t, nil)
			p.Serve(jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey)), http.StatusOK, tt.cacheControl)
			c := newCache(t, p, func(o *jwks.Options) { o.MinRefresh, o.MaxRefresh = tt.min, tt.max })
			runCache(t, c)
			ts := waitRequests(t, p, 4, 10*tt.wantGap+10*time.Second)
			// Timers never fire early, so no gap may be short; a loaded
			// machine makes some late, so the interval shows in the
			// shortest gap.
			shortest := time.Duration(1<<63 - 1)
			for i := 1; i < 4; i++ {
				gap := ts[i].Sub(ts[i-1])
				if gap < tt.wantGap-5*time.Millisecond {
					t.Errorf("gap %d = %s, want at least about %s", i, gap, tt.wantGap)
				}
				shortest = min(shortest, gap)
			}
			if shortest > tt.wantGap+750*time.Millisecond {
				t.Errorf("shortest of the gaps %s = %s, want about %s", ts, shortest, tt.wantGap)
			}
			if st := c.Status(); st.NextRefresh.IsZero() || st.Keys != 1 {
				t.Errorf("status = %+v, want keys and a next refresh", st)
			}
		})
	}
}

func TestRunKeepsServingWhileDown(t *testing.T) {
	k := keys()
	p := newIDP(t, jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey)))
	c := newCache(t, p, func(o *jwks.Options) { o.MinRefresh, o.MaxRefresh = 100*time.Millisecond, 100*time.Millisecond })
	runCache(t, c)
	waitRequests(t, p, 1, 5*time.Second)
	p.Serve(nil, http.StatusServiceUnavailable, "")
	// Retries back off but never wait longer than MinRefresh.
	// Three retries at most 100ms apart take 300ms; uncapped they would
	// take 3.5s at least (1s doubled, the upper half jittered). The margin
	// is for a loaded machine.
	ts := waitRequests(t, p, 5, 10*time.Second)
	if d := ts[4].Sub(ts[1]); d > 300*time.Millisecond+2*time.Second {
		t.Errorf("three retries took %s (%s), want at most about 300ms", d, ts)
	}
	if _, err := c.Key(context.Background(), "k1"); err != nil {
		t.Fatalf("cached key while down: %v", err)
	}
	st := c.Status()
	if !st.Partitioned || st.PartitionedSince.IsZero() || st.FetchFailures < 3 || st.KeySets != 1 {
		t.Fatalf("status = %+v", st)
	}
	p.Serve(jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey)), http.StatusOK, "")
	testkit.Poll(t, 30*time.Second, "the partition to end after the IdP came back", func() (bool, string) {
		st := c.Status()
		return !st.Partitioned, fmt.Sprintf("%+v", st)
	})
}

func TestRunTwice(t *testing.T) {
	p := newIDP(t, jwksJSON(t, rsaJWK("k1", &keys().rsa.PublicKey)))
	c := newCache(t, p, nil)
	runCache(t, c)
	waitRequests(t, p, 1, 5*time.Second)
	if err := c.Run(context.Background()); err == nil {
		t.Fatal("second concurrent Run returned nil, want an error")
	}
}

// When Run returns, no fetch is left under way: the one in flight against
// a provider that does not answer is cancelled and has been recorded, so
// that an engine closed on a failed start logs nothing after the error
// that stopped it.
func TestRunLeavesNoFetchBehind(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c, err := jwks.New(jwks.Options{URL: srv.URL + "/jwks.json", Client: srv.Client(), FetchTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-started
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st := c.Status(); st.Fetches != 1 || st.LastError == "" {
		t.Errorf("after Run returned: %d fetches recorded, last error %q; want the cancelled fetch recorded", st.Fetches, st.LastError)
	}
}
