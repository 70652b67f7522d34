package gctune

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestApply(t *testing.T) {
	// Whatever a case sets is put back, for the other tests of the binary.
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	})
	tests := []struct {
		name        string
		env         map[string]string
		cached      int
		want        Settings
		wantPercent int
		wantLimit   int64
	}{
		{"defaults", nil, 20000, Settings{Percent: 400, Limit: 48<<20 + 20000*2048}, 400, 48<<20 + 20000*2048},
		{"limit grows with the cache", nil, 100000, Settings{Percent: 400, Limit: 48<<20 + 100000*2048}, 400, 48<<20 + 100000*2048},
		{"GOGC from the environment", map[string]string{"GOGC": "50"}, 0, Settings{Limit: 48 << 20}, 100, 48 << 20},
		{"GOMEMLIMIT from the environment", map[string]string{"GOMEMLIMIT": "1GiB"}, 10, Settings{Percent: 400}, 400, math.MaxInt64},
		{"both from the environment", map[string]string{"GOGC": "off", "GOMEMLIMIT": "1GiB"}, 10, Settings{}, 100, math.MaxInt64},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			got := Apply(tc.cached, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if got != tc.want {
				t.Errorf("Apply = %+v, want %+v", got, tc.want)
			}
			if p := debug.SetGCPercent(100); p != tc.wantPercent {
				t.Errorf("GC percent = %d, want %d", p, tc.wantPercent)
			}
			if l := debug.SetMemoryLimit(-1); l != tc.wantLimit {
				t.Errorf("memory limit = %d, want %d", l, tc.wantLimit)
			}
		})
	}
}

func TestSettingsString(t *testing.T) {
	for _, tc := range []struct {
		s    Settings
		want string
	}{
		{Settings{Percent: 400, Limit: 87 << 20}, "GOGC=400 GOMEMLIMIT=87MiB"},
		{Settings{}, "GOGC=from environment GOMEMLIMIT=from environment"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.s, got, tc.want)
		}
	}
}
