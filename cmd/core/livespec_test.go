package main

import (
	"io"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// TestLiveCommandsTakeTheSpecFlags: the flags the specification gives
// trace tail, log tail and policy dry-run exist under those names, of
// those kinds.
func TestLiveCommandsTakeTheSpecFlags(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	tests := []struct {
		path  []string
		flags map[string]string // name -> pflag type
	}{
		{[]string{"trace", "tail"}, map[string]string{"sidecar": "string", "tenant": "string", "service": "string",
			"trace-id": "string", "errors-only": "bool", "since": "string", "output": "string"}},
		{[]string{"log", "tail"}, map[string]string{"sidecar": "string", "tenant": "string", "filter": "string",
			"trace-id": "string", "level": "string", "since": "string", "format": "string", "output": "string"}},
		{[]string{"policy", "dry-run"}, map[string]string{"sidecar": "string", "duration": "duration", "output": "string"}},
	}
	for _, tt := range tests {
		name := strings.Join(tt.path, " ")
		t.Run(name, func(t *testing.T) {
			c, _, err := root.Find(tt.path)
			if err != nil || c.Name() != tt.path[len(tt.path)-1] {
				t.Fatalf("core %s: no such command (%v)", name, err)
			}
			for flag, typ := range tt.flags {
				f := c.Flag(flag)
				if f == nil {
					t.Errorf("core %s has no --%s", name, flag)
				} else if f.Value.Type() != typ {
					t.Errorf("core %s --%s is a %s, want a %s", name, flag, f.Value.Type(), typ)
				}
			}
		})
	}
}

// TestLiveCommandsAcceptTheSpecValues: every value form the specification
// shows passes the flag checks and reaches the sidecar (here: none, exit 3).
func TestLiveCommandsAcceptTheSpecValues(t *testing.T) {
	url := "http://" + testkit.DeadAddr(t)
	for _, args := range [][]string{
		{"trace", "tail", "--tenant", "acme", "--service", "orders", "--trace-id", "4bf92f3577b34da6a3ce929d0e0e4736", "--errors-only", "--since", "5m"},
		{"trace", "tail", "--since", "1h", "--output", "json"},
		{"log", "tail", "--filter", "policy.result=denied", "--level", "error"},
		{"log", "tail", "--filter", "user_id=u-1", "--level", "warn", "--since", "5m"},
		{"log", "tail", "--tenant", "acme", "--level", "info", "--trace-id", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"log", "tail", "--level", "debug", "--since", "1h", "--format", "json"},
		{"policy", "dry-run", "../../policies", "--duration", "5m"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := run(t, "", append(args, "--sidecar", url)...)
			if r.code != 3 || !strings.Contains(r.stderr, "sidecar at "+url+" is not reachable") {
				t.Fatalf("exit %d, want 3 (flags accepted, sidecar unreachable)\nstderr:\n%s", r.code, r.stderr)
			}
		})
	}
}
