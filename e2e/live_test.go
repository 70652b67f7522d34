package e2e

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// outputTimeout bounds every wait for output of a core process.
const outputTimeout = 20 * time.Second

// startCore runs `core args...` against the sidecar as a process whose
// output the test reads.
func startCore(t *testing.T, s *harness.Sidecar, args ...string) *harness.Process {
	t.Helper()
	cmd := exec.Command(harness.Binary(t, "core"), append(args, "--sidecar", s.URL(""))...)
	cmd.Env = append(cmd.Environ(), "NO_COLOR=")
	return harness.StartProcess(t, "core "+strings.Join(args, " "), cmd)
}

// waitStderr waits until the process's stderr contains want.
func waitStderr(t *testing.T, p *harness.Process, want string) {
	t.Helper()
	if out, err := p.WaitOutput(t, true, outputTimeout, func(s string) bool { return strings.Contains(s, want) }); err != nil {
		t.Fatalf("%v; stderr so far:\n%s", err, out)
	}
}

// waitLines waits until stdout holds n complete lines and returns them.
func waitLines(t *testing.T, p *harness.Process, n int) []string {
	t.Helper()
	out, err := p.WaitOutput(t, false, outputTimeout, func(s string) bool { return strings.Count(s, "\n") >= n })
	if err != nil {
		t.Fatalf("%v; stdout so far:\n%s\nstderr:\n%s", err, out, p.Stderr.String())
	}
	return strings.Split(strings.TrimRight(out, "\n"), "\n")
}

// interrupt sends Ctrl-C's signal and requires exit code 0.
func interrupt(t *testing.T, p *harness.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, outputTimeout); code != 0 {
		t.Errorf("%s exited %d after SIGINT, want 0\nstderr:\n%s", p.Name, code, p.Stderr.String())
	}
}

func TestLogTail(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	// The sidecar logs only errors; decisions reach the tail anyway.
	s := startSidecar(t, k, map[string]string{"SVC_LOG_LEVEL": "error"})
	viewer := k.token(t, "u-viewer", "acme", "viewer")

	asJSON := startCore(t, s, "log", "tail", "--filter", "policy.result=denied AND (tenant=acme OR tenant=globex)", "--format", "json")
	pretty := startCore(t, s, "log", "tail", "--tenant", "acme", "--level", "warn")
	waitStderr(t, asJSON, "tailing the logs of")
	waitStderr(t, pretty, "tailing the logs of")

	if r := envoyCheck(t, s, "GET", "/orders/1", viewer, nil); r.status != http.StatusOK {
		t.Fatalf("viewer GET /orders/1 = %d", r.status)
	}
	denied := envoyCheck(t, s, "DELETE", "/orders/1", viewer, nil)
	if denied.status != http.StatusForbidden {
		t.Fatalf("viewer DELETE /orders/1 = %d", denied.status)
	}
	deniedID := parseDeny(t, denied.body).DecisionID

	lines := waitLines(t, asJSON, 1)
	var rec struct {
		Level      string            `json:"level"`
		Msg        string            `json:"msg"`
		TraceID    string            `json:"trace_id"`
		Attributes map[string]string `json:"attributes"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("--format json line %q: %v", lines[0], err)
	}
	a := rec.Attributes
	if rec.Msg != "decision" || rec.Level != "WARN" || a["policy.result"] != "denied" || a["decision_id"] != deniedID ||
		a["action"] != "orders:delete" || a["user_id"] != "u-viewer" || a["tenant"] != "acme" || rec.TraceID == "" {
		t.Errorf("log record = %+v, want the denied decision %s", rec, deniedID)
	}

	text := waitLines(t, pretty, 1)
	if !strings.Contains(text[0], " WARN  decision policy.result=denied tenant=acme user_id=u-viewer action=orders:delete") ||
		!strings.Contains(text[0], "decision_id="+deniedID) || strings.Contains(text[0], "\x1b[") {
		t.Errorf("pretty line = %q", text[0])
	}

	// Only the denials matched either tail: a second denial, once both
	// tails print it, stands behind anything the allowed request could
	// have added, for each tail prints in order.
	if r := envoyCheck(t, s, "DELETE", "/orders/2", viewer, nil); r.status != http.StatusForbidden {
		t.Fatalf("viewer DELETE /orders/2 = %d", r.status)
	}
	for _, p := range []*harness.Process{asJSON, pretty} {
		if n := len(waitLines(t, p, 2)); n != 2 {
			t.Errorf("%s printed %d lines, want the 2 denials:\n%s", p.Name, n, p.Stdout.String())
		}
		interrupt(t, p)
	}
}

func TestLiveCommandsWhenTheSidecarGoes(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	tail := startCore(t, s, "log", "tail")
	waitStderr(t, tail, "tailing the logs of")
	s.Stop(t)
	if code := tail.Wait(t, outputTimeout); code != 3 {
		t.Errorf("log tail exited %d when the sidecar stopped, want 3\nstderr:\n%s", code, tail.Stderr.String())
	}
	if !strings.Contains(tail.Stderr.String(), "ended the stream") {
		t.Errorf("stderr does not say the sidecar ended the stream:\n%s", tail.Stderr.String())
	}
}

// On a terminal, log tail prints coloured lines, and trace tail with
// --output json prints one JSON object per span instead of its terminal
// view.
func TestLiveToolsOnATerminal(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	viewer := k.token(t, "u-viewer", "acme", "viewer")
	core := harness.Binary(t, "core")
	// CI and NO_COLOR would turn colours off (termenv); a terminal that
	// has them is what is tested.
	env := "env -u CI -u NO_COLOR TERM=xterm-256color "
	logs := newTmux(t, 200, 20, env+"'"+core+"' log tail --sidecar "+s.URL("")+"; sleep 60")
	traces := newTmux(t, 200, 20, env+"'"+core+"' trace tail --output json --sidecar "+s.URL("")+"; sleep 60")
	logs.screen("tailing the logs of")
	traces.screen("tailing the traces of")
	if r := envoyCheck(t, s, "DELETE", "/orders/1", viewer, nil); r.status != http.StatusForbidden {
		t.Fatalf("viewer DELETE = %d", r.status)
	}
	logs.screen("WARN", "decision", "policy.result=denied")
	if styled := logs.styled(); !strings.Contains(styled, "\x1b[") {
		t.Errorf("log tail on a terminal prints no colour:\n%q", styled)
	}
	pane := traces.screen(`"name":"policy.evaluate"`, `"name":"envoy.service.auth.v3.Authorization/Check"`)
	if strings.Contains(pane, "svc trace tail ·") {
		t.Errorf("trace tail --output json showed its terminal view:\n%s", pane)
	}
}
