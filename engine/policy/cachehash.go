package policy

import (
	"encoding/binary"
	"hash/maphash"
)

// bufHash is a maphash.Hash that gathers what it is given in a buffer of
// its own and hashes it in one call: a key is written in many small
// pieces (a tag, a length, a short string), and each Write of a
// maphash.Hash costs more than the copy. A key longer than the buffer
// goes through a maphash.Hash. The hash of a byte sequence is the same
// however it is split into writes, and the same as maphash.Bytes of it.
type bufHash struct {
	seed maphash.Seed
	n    int
	buf  [bufHashSize]byte
	// h has what overflowed buf, when streaming.
	h         maphash.Hash
	streaming bool
}

const bufHashSize = 256

// SetSeed starts a new hash with seed s.
func (b *bufHash) SetSeed(s maphash.Seed) {
	b.seed, b.n, b.streaming = s, 0, false
}

func (b *bufHash) writeByte(c byte) {
	if b.n == len(b.buf) {
		b.spill()
	}
	b.buf[b.n] = c
	b.n++
}

func (b *bufHash) write(p []byte) {
	if len(p) > len(b.buf)-b.n {
		b.spill()
		if len(p) > len(b.buf) {
			b.h.Write(p)
			return
		}
	}
	b.n += copy(b.buf[b.n:], p)
}

func (b *bufHash) writeString(s string) {
	if len(s) > len(b.buf)-b.n {
		b.spill()
		if len(s) > len(b.buf) {
			b.h.WriteString(s)
			return
		}
	}
	b.n += copy(b.buf[b.n:], s)
}

// writeTagged writes tag followed by n as 8 little-endian bytes.
func (b *bufHash) writeTagged(tag byte, n uint64) {
	if len(b.buf)-b.n < 9 {
		b.spill()
	}
	b.buf[b.n] = tag
	binary.LittleEndian.PutUint64(b.buf[b.n+1:b.n+9], n)
	b.n += 9
}

// spill moves the buffer into h.
func (b *bufHash) spill() {
	if !b.streaming {
		b.h.SetSeed(b.seed)
		b.streaming = true
	}
	b.h.Write(b.buf[:b.n])
	b.n = 0
}

// Sum64 returns the hash of everything written since SetSeed.
func (b *bufHash) Sum64() uint64 {
	if !b.streaming {
		return maphash.Bytes(b.seed, b.buf[:b.n])
	}
	b.h.Write(b.buf[:b.n])
	b.n = 0
	return b.h.Sum64()
}
