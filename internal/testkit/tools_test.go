package testkit

import (
	"fmt"
	"strings"
	"testing"
)

// outcome records how a test ended, for the skip-or-fail tests.
type outcome struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (o *outcome) Helper() {}

func (o *outcome) Skipf(format string, args ...any) {
	o.skipped, o.msg = true, fmt.Sprintf(format, args...)
	panic(o)
}

func (o *outcome) Fatalf(format string, args ...any) {
	o.failed, o.msg = true, fmt.Sprintf(format, args...)
	panic(o)
}

// run calls f with o, stopping where Skipf or Fatalf would end the test.
func (o *outcome) run(f func(testing.TB)) {
	defer func() {
		if r := recover(); r != nil && r != o {
			panic(r)
		}
	}()
	f(o)
}

func TestLookPathMissing(t *testing.T) {
	tests := []struct {
		ci           string
		skip, fail   bool
		wantInResult string
	}{
		{ci: "", skip: true, wantInResult: "apt-get install svc-no-such-pkg"},
		{ci: "false", skip: true, wantInResult: "Debian package svc-no-such-pkg"},
		{ci: "true", fail: true, wantInResult: "Debian package svc-no-such-pkg"},
		{ci: "1", fail: true, wantInResult: "required under CI"},
	}
	for _, tt := range tests {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			o := &outcome{TB: t}
			o.run(func(tb testing.TB) {
				LookPath(tb, "svc-no-such-program", "svc-no-such-pkg", "/nonexistent/svc-no-such-program")
			})
			if o.skipped != tt.skip || o.failed != tt.fail {
				t.Fatalf("skipped=%v failed=%v, want skipped=%v failed=%v (%s)", o.skipped, o.failed, tt.skip, tt.fail, o.msg)
			}
			if !strings.Contains(o.msg, tt.wantInResult) || !strings.Contains(o.msg, "svc-no-such-program") {
				t.Errorf("message %q does not name the program and %q", o.msg, tt.wantInResult)
			}
		})
	}
}

func TestLookPathFound(t *testing.T) {
	t.Setenv("CI", "true")
	o := &outcome{TB: t}
	var got string
	o.run(func(tb testing.TB) { got = LookPath(tb, "svc-no-such-program", "sh", "/bin/sh") })
	if o.skipped || o.failed || got != "/bin/sh" {
		t.Errorf("LookPath = %q (skipped=%v failed=%v %s), want /bin/sh from the extra paths", got, o.skipped, o.failed, o.msg)
	}
}
