package main

import (
	"io"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

func TestLogTailRefusesBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"filter missing a value", []string{"log", "tail", "--filter", "policy.result="}, 2,
			[]string{"malformed filter at position 15: expected a value", "  policy.result=\n                ^"}},
		{"filter with a dangling AND", []string{"log", "tail", "--filter", "tenant=acme AND"}, 2,
			[]string{"position 16", "got the end of the filter"}},
		{"unbalanced parenthesis", []string{"log", "tail", "--filter", "(tenant=acme OR tenant=globex"}, 2,
			[]string{"position 30", "expected ) to close the ( at position 1"}},
		{"bad level", []string{"log", "tail", "--level", "loud"}, 2, []string{`invalid --level "loud": want error, warn, info, debug or trace`}},
		{"trace level accepted", []string{"log", "tail", "--level", "trace"}, 3, []string{"is not reachable"}},
		{"bad since", []string{"log", "tail", "--since", "yesterday"}, 2, []string{`invalid --since "yesterday"`}},
		{"bad trace id", []string{"log", "tail", "--trace-id", "xyz"}, 2, []string{"want 32 hex digits"}},
		{"bad format", []string{"log", "tail", "--format", "yaml"}, 2, []string{`invalid --format "yaml"`}},
		{"trace tail bad since", []string{"trace", "tail", "--since", "-5m"}, 2, []string{`invalid --since "-5m"`}},
		{"trace tail bad trace id", []string{"trace", "tail", "--trace-id", "abc"}, 2, []string{"want 32 hex digits"}},
		{"dry-run zero duration", []string{"policy", "dry-run", "../../policies", "--duration", "0s"}, 2, []string{"invalid --duration 0s"}},
		{"dry-run queue too large", []string{"policy", "dry-run", "../../policies", "--queue-size", "100000000"}, 2, []string{"invalid --queue-size"}},
		{"dry-run missing dir", []string{"policy", "dry-run", "testdata/nope"}, 2, []string{"does not exist"}},
		{"dry-run broken candidate", []string{"policy", "dry-run", "testdata/policy-broken"}, 2, []string{"does not load"}},
		{"dry-run candidate failing lint", []string{"policy", "dry-run", "testdata/lint-broken"}, 2,
			[]string{"error no-default-allow-false", "candidate testdata/lint-broken refused: lint found 2 errors"}},
		{"dry-run --strict counts warnings", []string{"policy", "dry-run", "testdata/lint-warning", "--strict"}, 2,
			[]string{"error unused-import", "refused: lint found 1 error"}},
		// A warning alone does not refuse: the candidate goes on to the sidecar.
		{"dry-run candidate with a warning", []string{"policy", "dry-run", "testdata/lint-warning"}, 3, []string{"is not reachable"}},
		{"format and output disagree", []string{"log", "tail", "--format", "text", "--output", "json"}, 2, []string{"contradicts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Bad flags and candidates are refused before the sidecar
			// address (where nothing listens) is dialled.
			r := run(t, "", append(tt.args, "--sidecar", "http://127.0.0.1:1")...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\nstderr:\n%s", r.code, tt.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

func TestLiveCommandsUnreachableSidecar(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	url := "http://" + testkit.DeadAddr(t)
	for _, args := range [][]string{
		{"log", "tail"},
		{"log", "tail", "--format", "json"},
		{"trace", "tail"},
		{"trace", "tail", "--errors-only", "--output", "json"},
		{"policy", "dry-run", "../../policies", "--duration", "1s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := run(t, "", append(args, "--sidecar", url)...)
			if r.code != 3 || !strings.Contains(r.stderr, "sidecar at "+url+" is not reachable: connection refused") {
				t.Fatalf("exit %d, want 3 naming %s\nstderr:\n%s", r.code, url, r.stderr)
			}
		})
	}
}

// TestDropNotice: the sidecar's {"type":"dropped"} line is reported on
// stderr with its count and kept out of the output; records are not.
func TestDropNotice(t *testing.T) {
	tests := []struct {
		line string
		drop bool
		want string
	}{
		{`{"type":"dropped","dropped":42}`, true, "core: the sidecar dropped 42 spans for this watcher"},
		{`{"trace_id":"46c9e122401354ad6d3eec22e04870bb","name":"policy.evaluate"}`, false, ""},
		{`{"type":"span","dropped":1}`, false, ""},
		{`not json`, false, ""},
	}
	for _, tt := range tests {
		var stderr strings.Builder
		a := newApp(io.Discard, &stderr)
		if got := a.dropNotice([]byte(tt.line), "spans"); got != tt.drop {
			t.Errorf("dropNotice(%s) = %v, want %v", tt.line, got, tt.drop)
		}
		if !strings.Contains(stderr.String(), tt.want) || (tt.want == "" && stderr.Len() > 0) {
			t.Errorf("dropNotice(%s) wrote %q, want %q", tt.line, stderr.String(), tt.want)
		}
	}
}
