//go:build linux

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// carryFile returns an anonymous memory file that survives exec.
func carryFile() (*os.File, error) {
	fd, err := unix.MemfdCreate("svc-active-bundle", 0) // no MFD_CLOEXEC: exec keeps it
	if err != nil {
		return nil, fmt.Errorf("memfd: %w", err)
	}
	return os.NewFile(uintptr(fd), "svc-active-bundle"), nil
}
