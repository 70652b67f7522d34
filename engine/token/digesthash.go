package token

import (
	"bufio"
	"crypto/sha256"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/crypto/blake2b"
	"golang.org/x/sys/cpu"
)

// digestHash is the hash that keys the verified-token cache: SHA-256 on a
// CPU with SHA-256 instructions (x86's SHA extensions, arm64's SHA2),
// which hash a token there in about half BLAKE2b-256's time; BLAKE2b-256
// on any other, where it takes less than half SHA-256's
// (BenchmarkTokenDigest). Both have a 256-bit output and no attack better
// than generic, so no token can be made to reach another's entry whichever
// is used. It is chosen once per process: the cache never leaves the
// process, so replicas need not agree.
var digestHash = sync.OnceValue(func() digestFunc {
	if hasSHA256Instructions() {
		return digestFunc{"sha256", sha256.Sum256}
	}
	return digestFunc{"blake2b", blake2b.Sum256}
})

// digestFunc is a 256-bit hash and its name.
type digestFunc struct {
	name string
	sum  func([]byte) [32]byte
}

// hasSHA256Instructions reports whether this CPU computes SHA-256 in
// hardware, as Go's crypto/sha256 then does.
func hasSHA256Instructions() bool {
	switch runtime.GOARCH {
	case "arm64":
		return cpu.ARM64.HasSHA2
	case "amd64":
		// golang.org/x/sys/cpu does not report x86's SHA extensions;
		// Linux lists them among the CPU's flags.
		f, err := os.Open("/proc/cpuinfo")
		if err != nil {
			return false
		}
		defer f.Close()
		return cpuFlag(f, "sha_ni")
	}
	return false
}

// cpuFlag reports whether the first "flags" line of a /proc/cpuinfo
// listing names flag.
func cpuFlag(r io.Reader, flag string) bool {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(name) != "flags" {
			continue
		}
		for _, f := range strings.Fields(value) {
			if f == flag {
				return true
			}
		}
		return false
	}
	return false
}
