package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// InCI reports whether the tests run under CI: the environment variable
// CI holds a true value ("true", "1", as strconv.ParseBool reads it).
// There a missing outside program fails the test instead of skipping it,
// so that a CI image without it cannot pass by testing less.
func InCI() bool {
	v, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && v
}

// Missing skips t, or fails it under CI, because what is not installed;
// install says how to get it, such as "apt-get install nginx".
func Missing(t testing.TB, what, install string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is required under CI=%s but was not found (%s)", what, os.Getenv("CI"), install)
	}
	t.Skipf("%s not found (%s; scripts/install-test-deps.sh installs every test dependency); skipping outside CI", what, install)
}

// LookPath returns the path of the outside program name, looked up on
// PATH and then at each of also (such as /usr/sbin/nginx, which is not
// on every PATH). When it is nowhere, the test is skipped, or failed
// under CI, with a message naming pkg, the Debian package that holds it.
func LookPath(t testing.TB, name, pkg string, also ...string) string {
	t.Helper()
	for _, p := range append([]string{name}, also...) {
		if bin, err := exec.LookPath(p); err == nil {
			return bin
		}
	}
	Missing(t, name, fmt.Sprintf("Debian package %s: apt-get install %s", pkg, pkg))
	return ""
}
