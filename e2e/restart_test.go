package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/wire"
)

// loadClients is the number of goroutines, each on its own connection,
// that keep Check calls going.
const loadClients = 8

// checkLoad keeps Check calls going on several gRPC connections and
// counts them, their failures and the worst latency, in total and per
// phase (cut ends one).
type checkLoad struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	count    atomic.Int64
	mu       sync.Mutex
	failures []string
	worst    time.Duration
	phase    loadPhase
}

// loadPhase is what the load saw between two cuts.
type loadPhase struct {
	calls    int64
	failures int
	worst    time.Duration
}

// cut returns the phase since the previous cut and starts a new one.
func (l *checkLoad) cut() loadPhase {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.phase
	l.phase = loadPhase{}
	return p
}

// startCheckLoad starts loadClients loops of Check calls with token,
// each of which must be allowed.
func startCheckLoad(t *testing.T, s *harness.Sidecar, token string) *checkLoad {
	t.Helper()
	l := &checkLoad{stop: make(chan struct{})}
	headers := map[string]string{"authorization": "Bearer " + token}
	for range loadClients {
		conn, err := grpc.NewClient(s.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				began := time.Now()
				r, err := doCheck(conn, "GET", "/orders/1", headers, nil)
				took := time.Since(began)
				l.count.Add(1)
				l.mu.Lock()
				l.phase.calls++
				l.worst = max(l.worst, took)
				l.phase.worst = max(l.phase.worst, took)
				if err != nil {
					l.failures = append(l.failures, err.Error())
					l.phase.failures++
				} else if r.status != http.StatusOK {
					l.failures = append(l.failures, "status "+http.StatusText(r.status)+": "+r.body)
					l.phase.failures++
				}
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// finish stops the load and returns the request count, the failures and
// the worst latency.
func (l *checkLoad) finish() (int64, []string, time.Duration) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count.Load(), l.failures, l.worst
}

// waitCount waits until the load made at least n more calls.
func (l *checkLoad) waitCount(t *testing.T, n int64) {
	t.Helper()
	target := l.count.Load() + n
	testkit.Eventually(t, fmt.Sprintf("%d calls of the load", target), func() bool { return l.count.Load() >= target })
}

func statusOf(t *testing.T, s *harness.Sidecar) wire.Status {
	t.Helper()
	return getStatus(t, s)
}

// waitStatus polls /v1/status until cond holds, for at most a minute, and
// returns that status. It fails the test with the last answer or error
// when the time runs out, or when the sidecar exits.
func waitStatus(t *testing.T, s *harness.Sidecar, what string, cond func(wire.Status) bool) wire.Status {
	t.Helper()
	var st wire.Status
	testkit.Poll(t, time.Minute, what, func() (bool, string) {
		var err error
		st, err = fetchStatus(s)
		if err == nil && cond(st) {
			return true, ""
		}
		select {
		case <-s.Done():
			t.Fatalf("svc-sidecar exited with code %d while waiting for %s", s.ExitCode(), what)
		default:
		}
		return false, fmt.Sprintf("status %+v, error %v", st, err)
	})
	return st
}

// runCore runs the core binary and returns its exit code and output.
func runCore(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return testkit.Run(t, exec.Command(harness.Binary(t, "core"), args...))
}

// runCoreAt runs core against the sidecar s.
func runCoreAt(t *testing.T, s *harness.Sidecar, args ...string) (int, string, string) {
	t.Helper()
	return runCore(t, append([]string{"--sidecar", "http://" + s.HTTPAddr}, args...)...)
}

// TestRestartAndReloadUnderLoad restarts the sidecar with core sidecar
// restart, then swaps its policy with core sidecar reload-policy, while
// gRPC clients keep Check calls going: not one call may fail. The PID
// stays, the image changes, and the restart prints "healthy <version>".
func TestRestartAndReloadUnderLoad(t *testing.T) {
	k := newKeyring(t)
	dir := t.TempDir()
	signKey, verifyKey := ecKeyPair(t, dir)
	s := startSidecar(t, k, map[string]string{
		"SVC_RATE_LIMIT_DEFAULT_RPM": "100000000",
		"SVC_BUNDLE_VERIFY_KEY_FILE": verifyKey,
		"SVC_LOG_LEVEL":              "info",
	})
	before := statusOf(t, s)
	load := startCheckLoad(t, s, k.token(t, "alice", "acme", "viewer"))
	load.waitCount(t, 200)
	load.cut()

	code, stdout, stderr := runCoreAt(t, s, "sidecar", "restart", "--drain-timeout", "10")
	if code != 0 || !regexp.MustCompile(`^healthy \d+\.\d+\.\d+\S*\n$`).MatchString(stdout) {
		t.Fatalf("core sidecar restart: exit %d, stdout %q, stderr %q; want healthy and a dotted version", code, stdout, stderr)
	}
	if strings.Contains(stderr, "policy revision") {
		t.Errorf("restart with an unchanged policy notes a revision change: %q", stderr)
	}
	load.waitCount(t, 200)
	restart := load.cut()
	t.Logf("restart: %d Check calls from %d clients, %d failed, worst latency %s", restart.calls, loadClients, restart.failures, restart.worst)
	after := statusOf(t, s)
	if after.PID != before.PID || after.PID != s.Pid() || !after.StartedAt.After(before.StartedAt) {
		t.Errorf("pid %d→%d (process %d), started_at %s→%s; want the same PID and a new image",
			before.PID, after.PID, s.Pid(), before.StartedAt, after.StartedAt)
	}

	bundle := filepath.Join(dir, "policy.tar.gz")
	if code, _, stderr := runCoreAt(t, s, "policy", "bundle", "--dir", filepath.Join(harness.ModuleRoot(t), "policies"),
		"--sign-key", signKey, "--revision", "under-load-2", "--out", bundle); code != 0 {
		t.Fatalf("core policy bundle: exit %d: %s", code, stderr)
	}
	code, stdout, stderr = runCoreAt(t, s, "sidecar", "reload-policy", "--bundle", bundle)
	if code != 0 || !strings.Contains(stdout, "under-load-2") {
		t.Fatalf("core sidecar reload-policy: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	load.waitCount(t, 200)
	swap := load.cut()
	t.Logf("policy swap: %d Check calls from %d clients, %d failed, worst latency %s", swap.calls, loadClients, swap.failures, swap.worst)

	n, failures, worst := load.finish()
	t.Logf("in all: %d Check calls from %d clients through a restart and a policy swap; %d failed; worst latency %s",
		n, loadClients, len(failures), worst)
	if len(failures) > 0 {
		t.Errorf("%d of %d calls failed (restart %d, swap %d); first: %s", len(failures), n, restart.failures, swap.failures, failures[0])
	}
	if st := statusOf(t, s); st.PolicyRevision != "under-load-2" || st.Status != "healthy" {
		t.Errorf("after the swap: status %q revision %q, want healthy under-load-2", st.Status, st.PolicyRevision)
	}

	// Without policy.bundle_cache_dir too, the uploaded bundle is what the
	// next image serves.
	code, stdout, stderr = runCoreAt(t, s, "--output", "json", "sidecar", "restart", "--drain-timeout", "10")
	var rep struct {
		Status                 string `json:"status"`
		PolicyRevision         string `json:"policy_revision"`
		PreviousPolicyRevision string `json:"previous_policy_revision"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != 0 {
		t.Fatalf("core --output json sidecar restart: exit %d, %v, stdout %q, stderr %q", code, err, stdout, stderr)
	}
	if rep.PreviousPolicyRevision != "under-load-2" || rep.PolicyRevision != "under-load-2" || strings.Contains(stderr, "policy revision") {
		t.Errorf("restart after an unpersisted upload: %+v, stderr %q; want under-load-2 kept", rep, stderr)
	}
}

// ecKeyPair writes a P-256 bundle signing key pair into dir and returns
// the paths of the private and the public key.
func ecKeyPair(t *testing.T, dir string) (private, public string) {
	t.Helper()
	priv, pub := testkit.ECKeyPEM(t)
	private = harness.WriteFile(t, dir, "bundle.pem", string(priv))
	public = harness.WriteFile(t, dir, "bundle.pub.pem", string(pub))
	return private, public
}

// TestSIGHUP: an invalid configuration is refused and the sidecar keeps
// serving as it was; a changed one is applied by a new image of the same
// process; an unchanged one reloads the policy directory in place.
func TestSIGHUP(t *testing.T) {
	k := newKeyring(t)
	policyDir := t.TempDir()
	harness.WriteFile(t, policyDir, "authz.rego", readPolicy(t))
	s := startSidecar(t, k, map[string]string{"SVC_POLICY_DIR": policyDir, "SVC_LOG_LEVEL": "info"})
	first := statusOf(t, s)
	hup := func() {
		t.Helper()
		if err := s.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	// Unchanged configuration, edited policy: reloaded in place.
	harness.WriteFile(t, policyDir, "extra.rego", "package svc.extra\n\nx := 1\n")
	hup()
	reloaded := waitStatus(t, s, "the policy reload", func(st wire.Status) bool { return st.PolicyRevision != first.PolicyRevision })
	if !reloaded.StartedAt.Equal(first.StartedAt) {
		t.Errorf("an unchanged configuration restarted the image")
	}

	// Invalid configuration: refused, nothing changes.
	harness.WriteFile(t, s.Dir, "svc.toml", sidecarConfig+"\n[sdk]\nfail_mode = \"sideways\"\n")
	hup()
	if _, err := s.WaitOutput(t, true, time.Minute, func(out string) bool {
		return strings.Contains(out, "SIGHUP: configuration refused")
	}); err != nil {
		t.Fatalf("no refusal logged: %v", err)
	}
	if st := statusOf(t, s); !st.StartedAt.Equal(first.StartedAt) || st.Status != "healthy" {
		t.Errorf("after an invalid configuration: %+v, want the same image, healthy", st)
	}

	// Changed configuration: a new image serves it, same PID.
	harness.WriteFile(t, s.Dir, "svc.toml", strings.Replace(sidecarConfig, `plan = "team"`, `plan = "enterprise"`, 1))
	hup()
	if st := waitStatus(t, s, "the new image", func(st wire.Status) bool { return st.StartedAt.After(first.StartedAt) }); st.PID != s.Pid() {
		t.Errorf("pid %d, want %d", st.PID, s.Pid())
	}
	_, _, body := harness.Get(t, s.URL("/v1/config"))
	if !strings.Contains(string(body), "plan = 'enterprise'") {
		t.Errorf("the new image does not serve the changed configuration:\n%s", body)
	}
}

func readPolicy(t *testing.T) string {
	t.Helper()
	b := repoFile(t, "policies", "authz.rego")
	return string(b)
}

// TestRestartAsPID1 runs the sidecar as PID 1 of its own PID namespace,
// as in a container: a restart keeps it PID 1 (the container lives on)
// and brings it back healthy.
func TestRestartAsPID1(t *testing.T) {
	if err := exec.Command("unshare", "--pid", "--fork", "true").Run(); err != nil {
		if harness.InCI() {
			t.Fatalf("unshare --pid (util-linux, root or user namespaces) is needed: %v", err)
		}
		t.Skipf("cannot make a PID namespace here: %v", err)
	}
	s := harness.LaunchSidecar(t, harness.SidecarOptions{
		Wrapper: []string{"unshare", "--pid", "--fork", "--kill-child=SIGTERM"},
		Env:     map[string]string{"SVC_AUDIT_DESTINATION": "off"},
	})
	testkit.Eventually(t, "the sidecar serving", func() bool {
		resp, err := http.Get(s.URL("/readyz"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	before := statusOf(t, s)
	if before.PID != 1 {
		t.Fatalf("pid %d, want 1 inside the namespace", before.PID)
	}
	code, stdout, stderr := runCoreAt(t, s, "sidecar", "restart", "--drain-timeout", "2")
	if code != 0 || !strings.HasPrefix(stdout, "healthy ") {
		t.Fatalf("core sidecar restart: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	after := statusOf(t, s)
	if after.PID != 1 || !after.StartedAt.After(before.StartedAt) {
		t.Errorf("after the restart: pid %d, started_at %s (was %s); want PID 1 and a new image", after.PID, after.StartedAt, before.StartedAt)
	}
	select {
	case <-s.Done():
		t.Fatal("the namespace's init exited: a container would have stopped")
	default:
	}
	// unshare ignores SIGTERM while it waits; the process group reaches
	// the sidecar, as a container runtime's stop reaches PID 1.
	if err := syscall.Kill(-s.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.Wait(t, 20*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}
