package testkit

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"
)

// Run runs cmd to its end and returns its exit code and what it wrote to
// stdout and stderr. A program that exits non-zero is an answer, not an
// error; one that cannot be started fails t.
func Run(t testing.TB, cmd *exec.Cmd) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("run %s: %v", cmd.Path, err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errOut.String()
}
