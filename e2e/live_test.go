package e2e

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
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

func TestTraceTailJSON(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	viewer := k.token(t, "u-viewer", "acme", "viewer")

	tail := startCore(t, s, "trace", "tail", "--errors-only", "--tenant", "acme")
	waitStderr(t, tail, "tailing the traces of")
	if r := envoyCheck(t, s, "GET", "/orders/1", viewer, nil); r.status != http.StatusOK {
		t.Fatalf("viewer GET = %d", r.status)
	}
	if r := envoyCheck(t, s, "DELETE", "/orders/1", viewer, nil); r.status != http.StatusForbidden {
		t.Fatalf("viewer DELETE = %d", r.status)
	}
	// Not a terminal: one JSON object per span, the denied trace only.
	lines := waitLines(t, tail, 3)
	names := map[string]map[string]any{}
	for _, l := range lines[:3] {
		var sp map[string]any
		if err := json.Unmarshal([]byte(l), &sp); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		names[sp["name"].(string)] = sp
	}
	eval := names["policy.evaluate"]
	server := names["envoy.service.auth.v3.Authorization/Check"]
	if eval == nil || names["auth.verify_token"] == nil || server == nil {
		t.Fatalf("spans = %v, want the server span, auth.verify_token and policy.evaluate", lines)
	}
	attrs := eval["attributes"].(map[string]any)
	if attrs["svc.result"] != "deny" || attrs["svc.action"] != "orders:delete" || eval["trace_id"] != server["trace_id"] {
		t.Errorf("policy.evaluate = %v", eval)
	}
	// A second denied trace, once printed, stands behind anything the
	// allowed request could have added: the tail prints in order.
	if r := envoyCheck(t, s, "DELETE", "/orders/2", viewer, nil); r.status != http.StatusForbidden {
		t.Fatalf("viewer DELETE /orders/2 = %d", r.status)
	}
	if n := len(waitLines(t, tail, 6)); n != 6 {
		t.Errorf("printed %d spans, want the 3 of each denied trace:\n%s", n, tail.Stdout.String())
	}
	interrupt(t, tail)
}

// httpDecision sends one decision request to the sidecar's HTTP listener
// and returns its status.
func httpDecision(t *testing.T, s *harness.Sidecar, method, path, body string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, s.URL(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The local API and the HTTP check mode show in trace tail as one tree
// each, under the server span of the request, continuing the caller's
// trace when it sends a traceparent.
func TestTraceTailHTTPDecisions(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	viewer := k.token(t, "u-viewer", "acme", "viewer")
	const callerTrace = "0af7651916cd43dd8448eb211c80319c"

	tail := startCore(t, s, "trace", "tail", "--output", "json")
	waitStderr(t, tail, "tailing the traces of")
	if st := httpDecision(t, s, http.MethodPost, "/v1/authorize", `{"action":"orders:read","resource":{"id":"9"}}`, map[string]string{
		"Authorization": "Bearer " + viewer, "traceparent": "00-" + callerTrace + "-b7ad6b7169203331-01",
	}); st != http.StatusOK {
		t.Fatalf("POST /v1/authorize = %d", st)
	}
	if st := httpDecision(t, s, http.MethodGet, "/check", "", map[string]string{
		"Authorization": "Bearer " + viewer, "X-Original-URI": "/orders/9", "X_Svc_Method": "DELETE",
	}); st != http.StatusForbidden {
		t.Fatalf("GET /check for a viewer's DELETE = %d", st)
	}
	// Two traces of three spans each; the server span of each ends last.
	traces := map[string][]map[string]any{}
	for _, l := range waitLines(t, tail, 6)[:6] {
		var sp map[string]any
		if err := json.Unmarshal([]byte(l), &sp); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		id := sp["trace_id"].(string)
		traces[id] = append(traces[id], sp)
	}
	for _, want := range []struct{ server, result string }{{"POST /v1/authorize", "allow"}, {"GET /check", "deny"}} {
		var tree []map[string]any
		for _, spans := range traces {
			if spans[len(spans)-1]["name"] == want.server {
				tree = spans
			}
		}
		if len(tree) != 3 {
			t.Fatalf("traces = %v, want one of three spans under %q", traces, want.server)
		}
		server := tree[2]
		if server["kind"] != "server" {
			t.Errorf("%s: kind %v, want server", want.server, server["kind"])
		}
		names := map[string]map[string]any{}
		for _, sp := range tree[:2] {
			names[sp["name"].(string)] = sp
			if sp["parent_id"] != server["span_id"] {
				t.Errorf("%s is not a child of %s: %v", sp["name"], want.server, sp)
			}
		}
		eval := names["policy.evaluate"]
		if names["auth.verify_token"] == nil || eval == nil || eval["attributes"].(map[string]any)["svc.result"] != want.result {
			t.Errorf("%s: children %v, want auth.verify_token and policy.evaluate with result %s", want.server, tree[:2], want.result)
		}
		if want.server == "POST /v1/authorize" && (server["trace_id"] != callerTrace || server["parent_id"] != "b7ad6b7169203331") {
			t.Errorf("the authorize server span %v does not continue the caller's trace %s", server, callerTrace)
		}
	}
	interrupt(t, tail)
}

// tmux drives a terminal program in a detached tmux session of its own
// server.
type tmux struct {
	t      *testing.T
	bin    string
	socket string
}

func newTmux(t *testing.T, width, height int, command string) *tmux {
	t.Helper()
	bin := harness.LookPath(t, "tmux", "tmux")
	// A socket in the test's own directory: a server of its own, nothing
	// left behind.
	m := &tmux{t: t, bin: bin, socket: filepath.Join(t.TempDir(), "tmux-"+rand.Text()[:6])}
	m.run("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", itoa(width), "-y", itoa(height), command)
	t.Cleanup(func() { _ = exec.Command(bin, "-S", m.socket, "kill-server").Run() })
	return m
}

func (m *tmux) run(args ...string) string {
	m.t.Helper()
	out, err := exec.Command(m.bin, append([]string{"-S", m.socket}, args...)...).CombinedOutput()
	if err != nil {
		m.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (m *tmux) keys(keys ...string) {
	m.t.Helper()
	m.run(append([]string{"send-keys", "-t", "main"}, keys...)...)
}

// screen waits until the pane shows everything in want and returns it.
func (m *tmux) screen(want ...string) string {
	m.t.Helper()
	deadline := time.Now().Add(outputTimeout)
	var pane string
	for time.Now().Before(deadline) {
		out, err := exec.Command(m.bin, "-S", m.socket, "capture-pane", "-p", "-t", "main").CombinedOutput()
		pane = string(out)
		if err == nil && containsAll(pane, want) {
			return pane
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.t.Fatalf("the screen never showed %q:\n%s", want, pane)
	return ""
}

// screenMatching waits until the pane, showing everything in want,
// matches the span tree re of what.
func (m *tmux) screenMatching(re *regexp.Regexp, what string, want ...string) {
	m.t.Helper()
	for deadline := time.Now().Add(outputTimeout); ; time.Sleep(50 * time.Millisecond) {
		pane := m.screen(want...)
		if re.MatchString(pane) {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("no span tree with timings for %s:\n%s", what, pane)
		}
	}
}

// styled returns the pane with its colours and attributes as escape
// sequences.
func (m *tmux) styled() string {
	m.t.Helper()
	return m.run("capture-pane", "-p", "-e", "-t", "main")
}

func containsAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestTraceTailTerminal(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	viewer := k.token(t, "u-viewer", "acme", "viewer")

	exitFile := filepath.Join(t.TempDir(), "exit")
	core := harness.Binary(t, "core")
	m := newTmux(t, 160, 40, "'"+core+"' trace tail --sidecar "+s.URL("")+"; echo $? > '"+exitFile+"'")
	m.screen("svc trace tail", "waiting for decisions")

	// A decision of the HTTP check mode is a tree like a gRPC one.
	if st := httpDecision(t, s, http.MethodGet, "/check", "", map[string]string{
		"Authorization": "Bearer " + viewer, "X-Original-URI": "/orders/9", "X_Svc_Method": "GET",
	}); st != http.StatusOK {
		t.Fatalf("GET /check = %d", st)
	}
	m.screen("ALLOW  orders:read on orders/9")
	httpTree := regexp.MustCompile(`(?m)^ {2}\S* ?GET /check +\d+(\.\d+)?(µs|ms)\n {4}\S* ?auth\.verify_token +\d+(\.\d+)?(µs|ms) +ALLOW\n {4}\S* ?policy\.evaluate +\d+(\.\d+)?(µs|ms) +ALLOW`)
	m.screenMatching(httpTree, "the HTTP check", "GET /check")

	if r := envoyCheck(t, s, "GET", "/orders/1", viewer, nil); r.status != http.StatusOK {
		t.Fatalf("viewer GET = %d", r.status)
	}
	if r := envoyCheck(t, s, "DELETE", "/orders/1", viewer, nil); r.status != http.StatusForbidden {
		t.Fatalf("viewer DELETE = %d", r.status)
	}
	// Two traces, each a tree with timings: server span, then its two children.
	m.screen("ALLOW  orders:read on orders/1", "DENY  orders:delete on orders/1", "reason=policy-deny")
	// The server span ends last: the tree is whole once it has arrived.
	tree := regexp.MustCompile(`(?m)^ {2}\S* ?envoy\.service\.auth\.v3\.Authorization/Check +\d+(\.\d+)?(µs|ms)\n {4}\S* ?auth\.verify_token +\d+(\.\d+)?(µs|ms) +ALLOW\n {4}\S* ?policy\.evaluate +\d+(\.\d+)?(µs|ms) +DENY`)
	m.screenMatching(tree, "the denied trace", "DENY")

	// The newest span (the denied policy.evaluate) is selected; Enter
	// expands it, Enter again collapses it.
	m.keys("Enter")
	m.screen("matched rule: data.svc.authz.deny_reasons", "deny reasons: role-forbidden: viewer cannot orders:delete",
		"intent: orders:delete on orders/1", "reason: policy-deny")
	m.keys("Enter")
	testkit.EventuallyWithin(t, outputTimeout, "Enter to collapse the span", func() bool {
		return !strings.Contains(m.screen("DENY"), "matched rule:")
	})

	// v: the variable inspector, the policy input with claims redacted.
	m.keys("v")
	insp := m.screen("policy input", `"id": "u-viewer"`, `"tenant_id": "acme"`, `"email": "[REDACTED]"`, "svc.decision_id =", "svc.matched_rule = data.svc.authz.deny_reasons")
	if strings.Contains(insp, "u-viewer@example.test") {
		t.Errorf("the inspector shows the e-mail claim:\n%s", insp)
	}
	m.keys("Escape")
	m.screen("svc trace tail", "DENY")

	m.keys("q")
	deadline := time.Now().Add(outputTimeout)
	for {
		b, err := os.ReadFile(exitFile)
		if err == nil && strings.TrimSpace(string(b)) != "" {
			if code := strings.TrimSpace(string(b)); code != "0" {
				t.Fatalf("core trace tail exited %s after q, want 0", code)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("core trace tail still runs after q:\n%s", m.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
