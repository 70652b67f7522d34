package jwks

import (
	"fmt"
	"testing"
	"time"
)

func TestRefreshInterval(t *testing.T) {
	const lo, hi = time.Minute, time.Hour
	tests := []struct {
		name string
		cc   []string
		want time.Duration
	}{
		{"absent", nil, lo},
		{"in range", []string{"public, max-age=600"}, 10 * time.Minute},
		{"upper case", []string{"Max-Age=600"}, 10 * time.Minute},
		{"quoted", []string{`max-age="600"`}, 10 * time.Minute},
		{"below min", []string{"max-age=5"}, lo},
		{"above max", []string{"max-age=86400"}, hi},
		{"huge", []string{"max-age=99999999999999999999999"}, hi},
		{"negative", []string{"max-age=-5"}, lo},
		{"garbage", []string{"max-age=ten"}, lo},
		{"no-cache wins", []string{"max-age=600, no-cache"}, lo},
		{"second header line", []string{"public", "max-age=120"}, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refreshInterval(tt.cc, lo, hi); got != tt.want {
				t.Fatalf("refreshInterval(%q) = %s, want %s", tt.cc, got, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		n        int
		limit    time.Duration
		min, max time.Duration
	}{
		{1, time.Minute, 500 * time.Millisecond, time.Second},
		{2, time.Minute, time.Second, 2 * time.Second},
		{5, time.Minute, 8 * time.Second, 16 * time.Second},
		{20, time.Minute, 30 * time.Second, time.Minute},
		{1, 100 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond},
		{9, 100 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.limit, tt.n), func(t *testing.T) {
			for range 100 {
				if got := backoff(tt.n, tt.limit); got < tt.min || got > tt.max {
					t.Fatalf("backoff(%d, %s) = %s, want in [%s, %s]", tt.n, tt.limit, got, tt.min, tt.max)
				}
			}
		})
	}
}

func TestBucket(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	b := newBucket(3, time.Minute, start)
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true}, {0, true}, {0, true}, {0, false},
		{10 * time.Second, false}, // half a token
		{20 * time.Second, true},  // one token refilled
		{20 * time.Second, false},
		{10 * time.Minute, true}, {10 * time.Minute, true}, {10 * time.Minute, true},
		{10 * time.Minute, false}, // never more than burst
		{5 * time.Minute, false},  // a clock going back refills nothing
	}
	for i, s := range steps {
		if got := b.allow(start.Add(s.at)); got != s.want {
			t.Fatalf("step %d at %s: allow = %v, want %v", i, s.at, got, s.want)
		}
	}
}
