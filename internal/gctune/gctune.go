// Package gctune adapts the Go garbage collector to svc-sidecar's load.
//
// A decision allocates a few kilobytes that die at once. With the
// runtime's default (GOGC=100) on the small heap of a sidecar, the
// collector runs hundreds of times a second under load, costing a
// quarter of the CPU and most of the latency tail. A fixed higher GOGC
// would multiply the memory of a sidecar whose token cache is full, and a
// memory limit makes the collector thrash once the live heap nears it.
//
// Tune therefore sets GOGC after every collection from the live heap:
// the heap may grow to HeapTarget in all, as far as GOGC=MaxPercent
// allows, and never by less than the default allows (MinPercent). A
// sidecar with little live data collects up to four times less often; one
// whose cache holds most of HeapTarget behaves as with the default.
//
// A caller that needs another target for a while (loading a policy
// bundle lowers it to bound the peak) takes a Hold: the tuner applies the
// lowest target held and stops overwriting it until the last hold is
// released, then sets GOGC from the live heap again.
//
// GOGC set in the environment always wins: Tune then does nothing.
// GOMEMLIMIT is the runtime's own and applies either way.
package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
)

// Bounds of the tuning.
const (
	// HeapTarget is the total heap that Tune lets garbage fill before a
	// collection, live data included, when MaxPercent allows.
	HeapTarget = 48 << 20
	// MinPercent and MaxPercent bound the GOGC values Tune sets.
	MinPercent = 100
	MaxPercent = 400
)

// liveHeap is the runtime metric of the heap the last collection found
// live.
const liveHeap = "/gc/heap/live:bytes"

// Percent returns the GOGC value for a live heap of live bytes.
func Percent(live uint64) int {
	if live == 0 {
		return MaxPercent
	}
	if live >= HeapTarget {
		return MinPercent
	}
	return int(min(max((HeapTarget-live)*100/live, MinPercent), MaxPercent))
}

// Tuner adjusts GOGC after every collection until stopped.
type Tuner struct {
	stopped atomic.Bool
	last    atomic.Int64 // the GOGC value set last

	// mu orders the setting of GOGC: by the finalizer after a
	// collection, by Hold and its release, by Stop.
	mu     sync.Mutex
	held   []int // the targets of the holds not yet released
	sample []metrics.Sample
}

// Tune starts adjusting GOGC after every collection, unless lookupEnv
// (usually os.LookupEnv) reports GOGC set; then it returns nil.
func Tune(lookupEnv func(string) (string, bool)) *Tuner {
	if _, ok := lookupEnv("GOGC"); ok {
		return nil
	}
	t := &Tuner{sample: []metrics.Sample{{Name: liveHeap}}}
	t.adjust()
	t.arm()
	return t
}

// Percent returns the GOGC value set last, by the tuner or a hold.
func (t *Tuner) Percent() int { return int(t.last.Load()) }

// Stop ends the tuning and restores GOGC=100. It is safe to call on a nil
// Tuner.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Swap(true) || len(t.held) > 0 {
		// The last release restores the default.
		return
	}
	t.last.Store(MinPercent)
	debug.SetGCPercent(MinPercent)
}

// Hold sets GOGC to percent (a positive target) until release is called,
// instead of the tuner's own value: while any hold is active GOGC is the
// lowest percent held and collections do not change it. Holds nest and
// may be taken and released concurrently; calling a release more than
// once releases once. After the last release the tuner sets GOGC from the
// live heap again at once (or to the default when stopped meanwhile).
func (t *Tuner) Hold(percent int) (release func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = append(t.held, percent)
	t.set(slices.Min(t.held))
	var once sync.Once
	return func() { once.Do(func() { t.release(percent) }) }
}

func (t *Tuner) release(percent int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = slices.Delete(t.held, slices.Index(t.held, percent), slices.Index(t.held, percent)+1)
	switch {
	case len(t.held) > 0:
		t.set(slices.Min(t.held))
	case t.stopped.Load():
		t.last.Store(MinPercent)
		debug.SetGCPercent(MinPercent)
	default:
		t.set(t.percent())
	}
}

// adjust sets GOGC from the live heap, unless a hold is active.
func (t *Tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.held) > 0 || t.stopped.Load() {
		return
	}
	t.set(t.percent())
}

// percent is the tuner's own target for the live heap the last collection
// found. It is called with mu held.
func (t *Tuner) percent() int {
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	return Percent(live)
}

// set sets GOGC to p unless it is set to p already. It is called with mu
// held.
func (t *Tuner) set(p int) {
	if int(t.last.Swap(int64(p))) != p {
		debug.SetGCPercent(p)
	}
}

// sentinel is garbage from birth: its finalizer runs after the next
// collection, adjusts and arms a new one. It holds a pointer so that it is
// never combined with other tiny objects, whose finalizers could wait.
type sentinel struct{ t *Tuner }

func (t *Tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}
