// Package gctune chooses the Go garbage collector's settings for
// svc-sidecar: a decision allocates a few kilobytes that die at once, and
// with the runtime's default (GOGC=100) on the small heap of a sidecar the
// collector runs hundreds of times a second under load, costing a quarter
// of the CPU and most of the latency tail. svc-sidecar therefore lets the
// heap grow to five times its live size (GOGC=400), bounded by a soft
// memory limit that scales with what the sidecar is configured to keep
// (the verified-token cache), so that its memory stays near what it was
// with the default.
//
// GOGC and GOMEMLIMIT set in the environment always win: the runtime
// applies them itself and Apply leaves each one that is set alone.
package gctune

import (
	"fmt"
	"runtime/debug"
)

// Defaults of svc-sidecar when the environment sets neither variable.
const (
	// Percent is the GOGC value.
	Percent = 400
	// BaseLimit is the soft memory limit of a sidecar that caches no
	// token: code, policy, buffers and the garbage of in-flight requests.
	BaseLimit = 48 << 20
	// PerCachedToken is the limit added per entry of jwt.cache_size: a
	// cached token keeps its claims, about 1-2 KiB.
	PerCachedToken = 2 << 10
)

// Settings are the collector settings Apply put in place; a zero field
// was left to the environment.
type Settings struct {
	// Percent is the GOGC value set, 0 when GOGC was set in the
	// environment.
	Percent int
	// Limit is the soft memory limit set in bytes, 0 when GOMEMLIMIT was
	// set in the environment.
	Limit int64
}

// String describes s for logs and reports.
func (s Settings) String() string {
	gogc, limit := "from environment", "from environment"
	if s.Percent != 0 {
		gogc = fmt.Sprint(s.Percent)
	}
	if s.Limit != 0 {
		limit = fmt.Sprintf("%dMiB", s.Limit>>20)
	}
	return fmt.Sprintf("GOGC=%s GOMEMLIMIT=%s", gogc, limit)
}

// For returns the settings of a sidecar whose token cache holds up to
// cachedTokens entries, as Apply would set them with an empty environment.
func For(cachedTokens int) Settings {
	return Settings{Percent: Percent, Limit: BaseLimit + int64(max(cachedTokens, 0))*PerCachedToken}
}

// Apply sets the collector's settings for a sidecar caching up to
// cachedTokens verified tokens, except those that lookupEnv (usually
// os.LookupEnv) reports set: GOGC and GOMEMLIMIT.
func Apply(cachedTokens int, lookupEnv func(string) (string, bool)) Settings {
	s := For(cachedTokens)
	if _, ok := lookupEnv("GOGC"); ok {
		s.Percent = 0
	} else {
		debug.SetGCPercent(s.Percent)
	}
	if _, ok := lookupEnv("GOMEMLIMIT"); ok {
		s.Limit = 0
	} else {
		debug.SetMemoryLimit(s.Limit)
	}
	return s
}
