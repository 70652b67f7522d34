package deploy

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeDocker is a docker command for `make demo`: it appends its arguments
// to calls and fails the subcommand named by $FAIL_ON ("compose version"
// or "info").
const fakeDocker = `#!/bin/sh
echo "$*" >> "$CALLS"
case "$*" in "$FAIL_ON"*) [ -n "$FAIL_ON" ] && exit 1 ;; esac
exit 0
`

// TestMakeDemo runs `make demo` with no docker, with docker but no compose
// plugin, with no reachable engine, and with all of them: each missing
// piece gets its own message and a non-zero exit before anything starts,
// and otherwise the target runs `docker compose up --build`.
func TestMakeDemo(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make: %v", err)
	}
	root := mustAbs(t, "..")
	tests := []struct {
		name       string
		docker     bool
		failOn     string
		wantErr    string // on stderr, with a non-zero exit; "" for success
		wantCalled string // the last docker command
	}{
		{"no docker", false, "", "make demo: docker is not installed", ""},
		{"no compose plugin", true, "compose version", "make demo: 'docker compose' is not available", "compose version"},
		{"no engine", true, "info", "make demo: cannot reach a Docker engine", "info"},
		{"ready", true, "", "", "compose up --build"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			calls := filepath.Join(t.TempDir(), "calls")
			if tt.docker {
				if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fakeDocker), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(makeBin, "--no-print-directory", "-C", root, "demo")
			// PATH holds the fake docker only: the recipe's shell is
			// /bin/sh and uses no other command.
			cmd.Env = []string{"PATH=" + bin, "CALLS=" + calls, "FAIL_ON=" + tt.failOn, "HOME=" + t.TempDir()}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("make demo: %v\n%s%s", err, stdout.String(), stderr.String())
				}
			} else if err == nil || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Fatalf("make demo: %v, stderr %q; want a non-zero exit with %q", err, stderr.String(), tt.wantErr)
			}
			raw, _ := os.ReadFile(calls)
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			if got := lines[len(lines)-1]; got != tt.wantCalled {
				t.Errorf("last docker command %q, want %q (all: %q)", got, tt.wantCalled, lines)
			}
		})
	}
}
