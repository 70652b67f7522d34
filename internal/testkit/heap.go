package testkit

import (
	"runtime"
	"testing"
)

// LiveHeap is the heap in use after two collections, in bytes.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// HeapFlatOnceFull checks that a bounded cache of size entries keeps the
// live heap it had when full: put(n) stores n new distinct entries; the
// cache is filled with twice its size, then takes five times four times
// its size more, and the live heap after each must stay within 5 % of the
// heap when full. It measures memory after collection, not time.
func HeapFlatOnceFull(t testing.TB, size int, put func(n int)) {
	t.Helper()
	put(2 * size)
	full := LiveHeap()
	for round := range 5 {
		put(4 * size)
		if now := LiveHeap(); float64(now) > 1.05*float64(full) {
			t.Fatalf("live heap %d KiB after %d entries, %d KiB when full (%d entries)",
				now>>10, (2+4*(round+1))*size, full>>10, 2*size)
		}
	}
}
