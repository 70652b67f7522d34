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
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

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
