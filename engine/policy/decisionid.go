package policy

import (
	"crypto/rand"
	"encoding/hex"
	mrand "math/rand/v2"
	"sync"
)

// decisionIDs draws the bits of decision ids from a ChaCha8 generator
// seeded with 256 bits of the operating system's random source. ChaCha8
// is a cryptographically strong generator: without the seed, which never
// leaves the process, its output cannot be told from random or predicted
// from earlier output, and it erases its past keys as it goes, so ids
// stay unguessable; with 122 random bits per id a repeat is not expected
// before some 2^61 decisions. It costs a fifth of a read of the system's
// source (which, below Linux 6.11, is a system call per decision).
var decisionIDs = struct {
	mu sync.Mutex
	r  *mrand.ChaCha8
}{r: newIDSource()}

func newIDSource() *mrand.ChaCha8 {
	var seed [32]byte
	// crypto/rand.Read never returns an error on supported platforms.
	_, _ = rand.Read(seed[:])
	return mrand.NewChaCha8(seed)
}

// NewDecisionID returns a random 128-bit id as UUID version 4 text,
// unpredictable and unique (see decisionIDs).
func NewDecisionID() string {
	var b [16]byte
	decisionIDs.mu.Lock()
	_, _ = decisionIDs.r.Read(b[:])
	decisionIDs.mu.Unlock()
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}
