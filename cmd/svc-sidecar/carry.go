package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/sidecar"
)

// envCarried names the descriptor that carries the active policy bundle
// into the next process image, as "<fd>:<source>". The bundle travels as
// received, signature included, in an anonymous memory file (memfd on
// Linux, carry_linux.go), so that it never touches a disk and only this
// process can read it; elsewhere in an unlinked temporary file.
const envCarried = "SVC_HANDOVER_BUNDLE"

// maxCarriedBytes bounds what the next image reads back: the largest
// bundle policy.bundle_max_bytes can allow. The new image then holds the
// bundle to its own configured limit as it activates it.
const maxCarriedBytes = config.MaxBundleMaxBytes

// carryBundle writes b into a new memory file that survives exec and
// returns it with the value of envCarried describing it.
func carryBundle(b *sidecar.CarriedBundle) (*os.File, string, error) {
	f, err := carryFile()
	if err != nil {
		return nil, "", fmt.Errorf("carry the active bundle: %w", err)
	}
	fd := f.Fd()
	if _, err := f.Write(b.Data); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("carry the active bundle: %w", err)
	}
	return f, fmt.Sprintf("%d:%s", fd, b.Source), nil
}

// takeCarried reads the bundle a previous image carried (value is the
// content of envCarried; "" for none) and closes its descriptor.
func takeCarried(value string) (*sidecar.CarriedBundle, error) {
	if value == "" {
		return nil, nil
	}
	fdText, source, ok := strings.Cut(value, ":")
	fd, err := strconv.Atoi(fdText)
	if !ok || err != nil || fd < 3 {
		return nil, fmt.Errorf("%s: malformed value %q: want <fd>:<source>", envCarried, value)
	}
	f := os.NewFile(uintptr(fd), "svc-active-bundle")
	defer f.Close()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%s: descriptor %d: %w", envCarried, fd, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxCarriedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: descriptor %d: %w", envCarried, fd, err)
	}
	if len(data) > maxCarriedBytes {
		return nil, fmt.Errorf("%s: carried bundle larger than %d bytes", envCarried, maxCarriedBytes)
	}
	if len(data) == 0 {
		return nil, errors.New(envCarried + ": carried bundle is empty")
	}
	return &sidecar.CarriedBundle{Data: data, Source: source}, nil
}
