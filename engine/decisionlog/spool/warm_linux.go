package spool

import "golang.org/x/sys/unix"

// populate makes the pages of m, a part of a shared file mapping,
// present and writable (MADV_POPULATE_WRITE, Linux 5.14), so that the
// appends that copy into them take no page fault. Where it fails (an
// older kernel, a disk full under the file) the appends fault the pages
// in as they would have.
func populate(m []byte) {
	_ = unix.Madvise(m, unix.MADV_POPULATE_WRITE)
}
