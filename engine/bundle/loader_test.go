package bundle_test

import (
	"bytes"
	"crypto/elliptic"
	"errors"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"

	"github.com/svc-dev/svc/engine/bundle"
)

// recordingGC is a GC that sets GOGC to a value of its own while held,
// so that a test sees whether anything else set it meanwhile.
type recordingGC struct {
	mu       sync.Mutex
	held     []int // the percents asked for, in order
	released int
	during   []int // GOGC when each hold was released
}

// ownPercent is what recordingGC sets while held: neither the loader's
// target nor a default.
const ownPercent = 77

func (g *recordingGC) Hold(percent int) func() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = append(g.held, percent)
	debug.SetGCPercent(ownPercent)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.released++
		g.during = append(g.during, gcPercent())
		debug.SetGCPercent(100)
	}
}

// TestLoaderHoldsGC: a Loader with a GC asks it for the load's target and
// releases it when the load ends, successful or not, and does not set
// GOGC itself meanwhile.
func TestLoaderHoldsGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	key, other := ecKey(t, elliptic.P256()), ecKey(t, elliptic.P256())
	raw := build(t, defaultPolicyDir, bundle.BuildOptions{Revision: "rev-gc", SignKeyPEM: key.private})
	gc := &recordingGC{}
	l := bundle.Loader{Limits: bundle.LimitsOf(1 << 20), GC: gc}

	in := newSampling(raw)
	set, info, err := l.Open(in, &bundle.VerifyOptions{PublicKeyPEM: key.public})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if len(in.seen) != 1 || !in.seen[ownPercent] {
		t.Errorf("GOGC while the bundle was read: %v, want only the GC's %d", in.seen, ownPercent)
	}
	if set.Revision() != "rev-gc" || !info.Verified {
		t.Errorf("Open: revision %q, verified %v", set.Revision(), info.Verified)
	}
	_, _, err = l.Open(bytes.NewReader(raw), &bundle.VerifyOptions{PublicKeyPEM: other.public})
	if ve := (*bundle.VerificationError)(nil); !errors.As(err, &ve) {
		t.Fatalf("Open with another key: %v, want a VerificationError", err)
	}
	_, _, err = l.Open(bytes.NewReader([]byte("not a bundle")), nil)
	if !errors.Is(err, bundle.ErrMalformed) {
		t.Fatalf("Open of garbage: %v, want ErrMalformed", err)
	}

	gc.mu.Lock()
	defer gc.mu.Unlock()
	if len(gc.held) != 3 || gc.released != 3 {
		t.Fatalf("3 loads took %d holds (%v) and released %d, want 3 and 3", len(gc.held), gc.held, gc.released)
	}
	for i, p := range gc.held {
		if p != 25 {
			t.Errorf("load %d held GOGC %d, want 25", i, p)
		}
		if gc.during[i] != ownPercent {
			t.Errorf("load %d: GOGC was %d when the hold was released, want the GC's %d: the loader set it itself", i, gc.during[i], ownPercent)
		}
	}
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC = %d after the loads, want what the GC restored (100)", p)
	}
}

// TestLoaderWithoutGC: without a GC the loader lowers GOGC itself and
// restores the value it found.
func TestLoaderWithoutGC(t *testing.T) {
	prev := debug.SetGCPercent(150)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	raw := build(t, defaultPolicyDir, bundle.BuildOptions{Revision: "rev-nogc"})
	in := newSampling(raw)
	if _, _, err := (bundle.Loader{}).Open(in, nil); err != nil {
		t.Fatalf("Open: %v", err)
	}
	if len(in.seen) != 1 || !in.seen[25] {
		t.Errorf("GOGC while the bundle was read: %v, want 25", in.seen)
	}
	if p := gcPercent(); p != 150 {
		t.Errorf("GOGC = %d after a load, want the 150 it found", p)
	}
}

// sampling is a reader that records GOGC at every read: what the
// collector's target is while the load runs.
type sampling struct {
	r    *bytes.Reader
	seen map[int]bool
}

func newSampling(b []byte) *sampling { return &sampling{r: bytes.NewReader(b), seen: map[int]bool{}} }

func (s *sampling) Read(p []byte) (int, error) {
	s.seen[gcPercent()] = true
	return s.r.Read(p)
}

// gcPercent reads GOGC without setting it.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
