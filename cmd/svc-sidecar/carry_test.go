package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/svc-dev/svc/sidecar"
)

// TestCarryBundle: the bundle written for the next image reads back
// byte for byte with its source, and its descriptor survives exec.
func TestCarryBundle(t *testing.T) {
	// Larger than 64 MiB: policy.bundle_max_bytes allows bundles up to
	// 1 GiB, and a restart must carry the one that is active.
	data := bytes.Repeat([]byte("bundle\x00bytes"), 6_000_000)
	f, env, err := carryBundle(&sidecar.CarriedBundle{Data: data, Source: "upload"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(env, ":upload") {
		t.Errorf("%s = %q, want <fd>:upload", envCarried, env)
	}
	defer f.Close()
	if err := keptOnExec(f); err != nil {
		t.Error(err)
	}
	// takeCarried closes the descriptor it is given: give it a copy, so
	// that f stays the only owner of its own.
	fd, _, _ := strings.Cut(env, ":")
	dup, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := takeCarried(strings.Replace(env, fd+":", fmt.Sprint(dup)+":", 1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, data) || got.Source != "upload" {
		t.Errorf("read back %d bytes from %q, want %d from upload", len(got.Data), got.Source, len(data))
	}
}

func TestTakeCarriedMalformed(t *testing.T) {
	tests := []struct{ name, value string }{
		{"no source", "7"},
		{"not a number", "x:upload"},
		{"standard descriptor", "1:upload"},
		{"negative descriptor", "-5:upload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := takeCarried(tc.value); err == nil || !strings.Contains(err.Error(), envCarried) {
				t.Errorf("takeCarried(%q) = %v, want an error naming %s", tc.value, err, envCarried)
			}
		})
	}
	if b, err := takeCarried(""); b != nil || err != nil {
		t.Errorf("takeCarried(\"\") = %v, %v; want nothing", b, err)
	}
}

// keptOnExec reports an error unless f stays open across exec.
func keptOnExec(f *os.File) error {
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
	if err != nil {
		return err
	}
	if flags&unix.FD_CLOEXEC != 0 {
		return fmt.Errorf("descriptor %d is closed on exec", f.Fd())
	}
	return nil
}
