package e2e

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// candidateDir writes the default policy with viewers limited to listing
// orders: as a candidate it would newly deny every viewer's orders:read.
func candidateDir(t *testing.T) string {
	t.Helper()
	src := repoFile(t, "policies", "authz.rego")
	mod := strings.Replace(string(src), `"viewer": {"*": {"read"}}`, `"viewer": {"orders": {"list"}}`, 1)
	if mod == string(src) {
		t.Fatal("the default policy no longer has the viewer line the candidate changes")
	}
	dir := t.TempDir()
	harness.WriteFile(t, dir, "authz.rego", mod)
	return dir
}

func TestPolicyDryRunUnderLoad(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	// No evaluation may count as an error here: a bound the race detector
	// on a loaded machine cannot overrun.
	s := startSidecar(t, k, map[string]string{"SVC_RATE_LIMIT_DEFAULT_RPM": "1000000", "SVC_POLICY_DRY_RUN_EVAL_TIMEOUT": "10s"})
	viewer := k.token(t, "u-viewer", "acme", "viewer")
	dir := candidateDir(t)

	// A small queue, so that the load overflows it and skipped is tested.
	// The session would run for 10 minutes; Ctrl-C ends it once the load
	// is done, so the window holds all of it however slow the machine.
	dry := startCore(t, s, "policy", "dry-run", dir, "--duration", "10m", "--queue-size", "4", "--output", "json")
	waitStderr(t, dry, "core: dry-run ")

	// Load from a real gRPC client: 8 callers, reads (allowed) and deletes
	// (denied); the candidate must change no answer.
	const callers, perCaller = 8, 60
	var sent, wrong atomic.Int64
	var wg sync.WaitGroup
	conn := s.Conn(t)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perCaller {
				method, want := "GET", http.StatusOK
				if (c+i)%3 == 0 {
					method, want = "DELETE", http.StatusForbidden
				}
				r, err := doCheck(conn, method, "/orders/1", map[string]string{"authorization": "Bearer " + viewer}, nil)
				sent.Add(1)
				if err != nil || r.status != want {
					wrong.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if wrong.Load() != 0 {
		t.Errorf("%d of %d answers changed during the dry run", wrong.Load(), sent.Load())
	}
	// Ctrl-C ends the session early and prints its report.
	interrupt(t, dry)
	var rep struct {
		Evaluated, Allow, SimulatedDeny, Errors, Skipped, Decisions int64
		Revision                                                    string
		TopDenyReasons                                              []struct {
			Reason string
			Count  int64
		} `json:"top_deny_reasons"`
		Changed []struct {
			Change, Action, Tenant string
			Count                  int64
		}
	}
	out := dry.Stdout.String()
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("--output json is not one document: %v\n%s", err, out)
	}
	for _, key := range []string{"evaluated", "allow", "simulated_deny", "errors", "skipped", "top_deny_reasons", "changed"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("report has no %q: %s", key, out)
		}
	}
	if raw["state"] != "finished" || raw["ended"] == nil {
		t.Errorf("report after Ctrl-C = %s, want the finished session with its end", out)
	}
	json.Unmarshal([]byte(out), &rep)
	rep.SimulatedDeny = int64(raw["simulated_deny"].(float64))
	n := sent.Load()
	if rep.Evaluated+rep.Skipped != n {
		t.Errorf("evaluated %d + skipped %d = %d, want the %d decisions of the window", rep.Evaluated, rep.Skipped, rep.Evaluated+rep.Skipped, n)
	}
	if rep.Evaluated == 0 || rep.Errors != 0 || rep.Allow != 0 || rep.SimulatedDeny != rep.Evaluated {
		t.Errorf("report = %s: the candidate denies every viewer request", out)
	}
	if len(rep.Changed) != 1 || rep.Changed[0].Change != "newly-denied" || rep.Changed[0].Action != "orders:read" ||
		rep.Changed[0].Tenant != "acme" || rep.Changed[0].Count == 0 {
		t.Errorf("changed = %+v, want newly denied orders:read for acme", rep.Changed)
	}
	if len(rep.TopDenyReasons) == 0 || rep.TopDenyReasons[0].Reason != "role-forbidden: viewer cannot orders:read" {
		t.Errorf("top deny reasons = %+v", rep.TopDenyReasons)
	}

	// The audit file: one enforced record per request, one simulated
	// record with the candidate's revision per evaluation.
	s.Stop(t)
	var enforced, simulated int64
	for _, rec := range harness.ReadJSONLines(t, s.AuditPath) {
		if rec["simulated"] == true {
			simulated++
			if rec["policy_revision"] != rep.Revision || rec["source"] != "dry-run" {
				t.Errorf("simulated record %v, want revision %s", rec, rep.Revision)
			}
		} else {
			enforced++
		}
	}
	if enforced != n || simulated != rep.Evaluated {
		t.Errorf("audit file: %d enforced and %d simulated records, want %d and %d", enforced, simulated, n, rep.Evaluated)
	}
}

func TestPolicyDryRunRefusesAnInvalidCandidate(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	dir := t.TempDir()
	harness.WriteFile(t, dir, "authz.rego", "package svc.authz\n\nallow if { input.user.nme == \"x\" \n")
	dry := startCore(t, s, "policy", "dry-run", dir, "--duration", "5s")
	if code := dry.Wait(t, 30*time.Second); code != 2 {
		t.Fatalf("dry-run of a broken candidate exited %d, want 2\nstderr:\n%s", code, dry.Stderr.String())
	}
	status, _, body := harness.Do(t, mustRequest(t, http.MethodGet, s.URL("/v1/dry-run/sessions")))
	if status != http.StatusOK || !strings.Contains(string(body), `"sessions": []`) {
		t.Errorf("sessions after a refused candidate: %d %s", status, body)
	}
}

func TestPolicyModeDryRun(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, map[string]string{"SVC_POLICY_MODE": "dry-run"})
	viewer := k.token(t, "u-viewer", "acme", "viewer")
	r := envoyCheck(t, s, "DELETE", "/orders/1", viewer, nil)
	if r.status != http.StatusOK {
		t.Fatalf("policy.mode=dry-run: a policy denial answered %d, want 200", r.status)
	}
	if r := envoyCheck(t, s, "GET", "/orders/1", "garbage", nil); r.status != http.StatusUnauthorized {
		t.Errorf("policy.mode=dry-run: an invalid token answered %d, want 401", r.status)
	}
	_, _, body := harness.Do(t, mustRequest(t, http.MethodGet, s.URL("/v1/status")))
	if !strings.Contains(string(body), `"policy_mode": "dry-run"`) {
		t.Errorf("/v1/status does not show the mode: %s", body)
	}
	if code, out, errOut := runCoreAt(t, s, "sidecar", "status"); code != 0 || !regexp.MustCompile(`(?m)^Policy mode:\s+dry-run$`).MatchString(out) {
		t.Errorf("core sidecar status: exit %d, want the line Policy mode: dry-run\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCoreAt(t, s, "--output", "json", "sidecar", "status"); code != 0 || !strings.Contains(out, `"policy_mode": "dry-run"`) {
		t.Errorf("core sidecar status --output json: exit %d, want policy_mode dry-run\n%s", code, out)
	}
	s.Stop(t)
	var found bool
	for _, rec := range harness.ReadJSONLines(t, s.AuditPath) {
		if rec["action"] == "orders:delete" {
			found = true
			if rec["simulated"] != true || rec["allow"] != false || rec["reason"] != "policy-deny" {
				t.Errorf("audit record of the let-through denial = %v, want the would-be outcome, simulated", rec)
			}
		}
	}
	if !found {
		t.Error("no audit record of the let-through denial")
	}
}

func mustRequest(t *testing.T, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestPolicyDryRunProgressOnATerminal(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	viewer := k.token(t, "u-viewer", "acme", "viewer")
	dir := candidateDir(t)
	core := harness.Binary(t, "core")
	m := newTmux(t, 160, 20, "'"+core+"' policy dry-run '"+dir+"' --duration 8s --sidecar "+s.URL("")+"; sleep 60")
	m.screen("core: dry-run ")
	for range 3 {
		envoyCheck(t, s, "GET", "/orders/1", viewer, nil)
	}
	// The progress line counts while the session runs, then the report.
	m.screen("dry-run ", "/8s · evaluated 3 · allow 0 · simulated deny 3 · errors 0 · timeouts 0 · skipped 0")
	pane := m.screen("changes against enforcement:", "would newly deny 3 orders:read for tenant acme")
	if !strings.Contains(pane, "simulated deny 3") || !strings.Contains(pane, "top deny reasons:") {
		t.Errorf("final report:\n%s", pane)
	}
}
