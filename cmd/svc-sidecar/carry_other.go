//go:build !linux

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// carryFile returns a file that survives exec where there is no memfd
// (the macOS release build): a temporary file of mode 0600 whose name is
// removed before anything is written to it, with close-on-exec cleared.
func carryFile() (*os.File, error) {
	f, err := os.CreateTemp("", "svc-active-bundle-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFD, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("clear close-on-exec: %w", err)
	}
	return f, nil
}
