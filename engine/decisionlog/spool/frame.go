package spool

import (
	"encoding/binary"
	"hash/crc32"
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

// appendFrame appends the frame of data appended at t to b.
func appendFrame(b []byte, t time.Time, data []byte) []byte {
	var hdr [frameHeader]byte
	binary.BigEndian.PutUint32(hdr[0:4], uint32(len(data)))
	binary.BigEndian.PutUint64(hdr[8:16], uint64(t.UnixNano()))
	crc := crc32.Update(0, castagnoli, hdr[8:16])
	crc = crc32.Update(crc, castagnoli, data)
	binary.BigEndian.PutUint32(hdr[4:8], crc)
	b = append(b, hdr[:]...)
	return append(b, data...)
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
