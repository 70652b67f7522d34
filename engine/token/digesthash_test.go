package token

import (
	"crypto/sha256"
	"strings"
	"testing"

	"golang.org/x/crypto/blake2b"
)

// TestCPUFlag reads the SHA extensions' flag from /proc/cpuinfo listings
// as Linux writes them, and from none that lacks it.
func TestCPUFlag(t *testing.T) {
	const head = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"
	cases := []struct {
		name, listing string
		want          bool
	}{
		{"listed", head + "flags\t\t: fpu vme sse2 avx2 sha_ni vaes\nbugs\t\t: sysret_ss_attrs\n", true},
		{"last flag", head + "flags\t\t: fpu sse2 sha_ni\n", true},
		{"absent", head + "flags\t\t: fpu vme sse2 avx2 aes\n", false},
		{"only a longer flag", head + "flags\t\t: fpu sha_ni_x xsha_ni\n", false},
		{"in another field", head + "bugs\t\t: sha_ni\nflags\t\t: fpu\n", false},
		{"first processor's flags", head + "flags\t\t: fpu\n\nprocessor\t: 1\nflags\t\t: fpu sha_ni\n", false},
		{"no flags line", head, false},
		{"empty", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := cpuFlag(strings.NewReader(c.listing), "sha_ni"); got != c.want {
				t.Errorf("cpuFlag = %v, want %v", got, c.want)
			}
		})
	}
}

// TestDigestHash: the cache's key is the chosen hash of the token, and
// the choice follows the CPU.
func TestDigestHash(t *testing.T) {
	const tok = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln"
	h := digestHash()
	var want [32]byte
	switch h.name {
	case "sha256":
		want = sha256.Sum256([]byte(tok))
	case "blake2b":
		want = blake2b.Sum256([]byte(tok))
	default:
		t.Fatalf("digest hash %q", h.name)
	}
	if d := digestOf(tok); !d.hashed || d.sum != want {
		t.Errorf("digestOf(%q) = %x (hashed %v), want the %s %x", tok, d.sum, d.hashed, h.name, want)
	}
	if wantName := map[bool]string{true: "sha256", false: "blake2b"}[hasSHA256Instructions()]; h.name != wantName {
		t.Errorf("digest hash %q on a CPU with SHA-256 instructions %v, want %q", h.name, hasSHA256Instructions(), wantName)
	}
}
