package spool

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"runtime/debug"
	"time"
)

// A frame is one record on disk:
//
//	length  uint32, big endian: the length of data
//	crc     uint32, big endian: CRC-32C of appended and data
//	appended int64, big endian: Unix nanoseconds
//	data    length bytes
const frameHeader = 16

// maxRecord bounds a frame's length field, so that a corrupt length is
// never taken for a huge record.
const maxRecord = 64 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type frame struct {
	appended time.Time
	data     []byte
}

// frameSum is the checksum of the frame of data appended at t (Unix
// nanoseconds). The time's 8 bytes are summed here, on the stack: the
// table-driven loop is crc32's own for so few bytes, and handing a
// stack array to crc32.Update would move it to the heap.
func frameSum(t int64, data []byte) uint32 {
	crc := ^uint32(0)
	for i := 56; i >= 0; i -= 8 {
		crc = castagnoli[byte(crc)^byte(uint64(t)>>i)] ^ crc>>8
	}
	return crc32.Update(^crc, castagnoli, data)
}

// putFrame writes the frame of data, appended at t with checksum sum, at
// the start of dst, a mapped segment file with room for it. A fault
// writing the mapping (the file's disk is full) is returned as an error
// rather than crash the process.
func putFrame(dst []byte, t int64, sum uint32, data []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
			err = fmt.Errorf("spool: writing the segment: %v", r)
		}
	}()
	binary.BigEndian.PutUint32(dst[0:4], uint32(len(data)))
	binary.BigEndian.PutUint32(dst[4:8], sum)
	binary.BigEndian.PutUint64(dst[8:16], uint64(t))
	copy(dst[frameHeader:], data)
	return nil
}

// decodeFrame reads the frame at the start of b: the frame, its size in
// bytes, and false when b holds no whole frame with a good checksum.
func decodeFrame(b []byte) (frame, int, bool) {
	if len(b) < frameHeader {
		return frame{}, 0, false
	}
	n := binary.BigEndian.Uint32(b[0:4])
	if n > maxRecord || int(n) > len(b)-frameHeader {
		return frame{}, 0, false
	}
	data := b[frameHeader : frameHeader+int(n)]
	crc := crc32.Update(0, castagnoli, b[8:16])
	crc = crc32.Update(crc, castagnoli, data)
	if crc != binary.BigEndian.Uint32(b[4:8]) {
		return frame{}, 0, false
	}
	return frame{appended: frameTime(b), data: data}, frameHeader + int(n), true
}

// frameLen is the size of the frame b starts with, from its header;
// false when b is shorter than a header.
func frameLen(b []byte) (int64, bool) {
	if len(b) < frameHeader {
		return 0, false
	}
	return frameHeader + int64(binary.BigEndian.Uint32(b[0:4])), true
}

// frameTime is the append time in a frame's header.
func frameTime(hdr []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(hdr[8:16])))
}
