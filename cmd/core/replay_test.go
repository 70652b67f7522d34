package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/internal/testkit/natstest"
	"github.com/svc-dev/svc/wire"
)

// recordedDecisions has an engine enforcing testdata/policy decide a few
// requests with its decision log shipping to NATS, and returns the
// records as NATS carries them, one per line, in the order decided.
func recordedDecisions(t *testing.T) []byte {
	t.Helper()
	srv := natstest.Start(t)
	p := idptest.New(t)
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	cfg.SDK.JWKSURL = p.JWKSURL()
	cfg.SDK.FailMode = config.FailClosed
	cfg.Tenants = map[string]config.Tenant{"acme": {Plan: "enterprise"}}
	cfg.Policy.Dir = pol
	cfg.DecisionLog = config.DecisionLog{Sink: config.DecisionLogNATS, URL: srv.URL(), SpoolDir: t.TempDir(),
		FlushInterval: config.Duration{Duration: 20 * time.Millisecond}}
	e, err := engine.New(cfg, engine.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	viewer := p.Token(t, idptest.Claims("u-1", "acme", "viewer"))
	editor := p.Token(t, idptest.Claims("u-2", "acme", "editor"))
	for _, d := range []struct{ tok, action string }{
		{viewer, "orders:read"},   // allowed; the candidate denies it
		{editor, "orders:read"},   // allowed by both
		{viewer, "orders:update"}, // denied by both
		{"not-a-token", "orders:read"},
	} {
		_, err := e.Decide(context.Background(), engine.Request{Credential: engine.BearerToken(d.tok),
			Input: engine.Input{Action: d.action, Resource: policy.Resource{Type: "orders", ID: "o-1", Tenant: "acme"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, "the decisions shipped", func() bool {
		st := e.Status().DecisionLog
		return st != nil && st.Shipped == 4
	})
	var out bytes.Buffer
	for _, m := range srv.Messages(t, "SVC_DECISIONS") {
		out.Write(m.Data)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// candidatePolicy is testdata/policy with orders:read taken from viewers.
func candidatePolicy(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(pol, "authz.rego"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(src), `"viewer": {"orders:read"},`, `"viewer": set(),`, 1)
	if changed == string(src) {
		t.Fatal("testdata/policy/authz.rego no longer grants viewers orders:read")
	}
	dir := t.TempDir()
	testkit.WriteFileMode(t, filepath.Join(dir, "authz.rego"), []byte(changed), 0o644)
	return dir
}

// core policy replay evaluates a candidate on logged decisions and
// reports, as dry-run does, where it decides differently; a record
// without its input is skipped, one the policy did not decide ignored.
func TestPolicyReplay(t *testing.T) {
	records := recordedDecisions(t)
	lines := strings.Split(strings.TrimSpace(string(records)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d records, want 4:\n%s", len(lines), records)
	}
	// The second decision again, as written with include_input = false.
	var noInput map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &noInput); err != nil {
		t.Fatal(err)
	}
	delete(noInput, "input")
	b, _ := json.Marshal(noInput)
	tmp := t.TempDir()
	from := filepath.Join(tmp, "records.ndjson")
	testkit.WriteFileMode(t, from, append(append(records, b...), '\n', '\n'), 0o644)
	cand := candidatePolicy(t)

	r := run(t, tmp, "--output", "json", "policy", "replay", cand, "--from", from)
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}
	var rep wire.DryRunReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--output json: %v\n%s", err, r.stdout)
	}
	want := wire.DryRunReport{Decisions: 4, Evaluated: 3, Allow: 1, SimulatedDeny: 2, Skipped: 1,
		Changed: []wire.Change{{Change: "newly-denied", Action: "orders:read", Tenant: "acme", Count: 1}}}
	if rep.State != wire.DryRunFinished || rep.Decisions != want.Decisions || rep.Evaluated != want.Evaluated ||
		rep.Allow != want.Allow || rep.SimulatedDeny != want.SimulatedDeny || rep.Skipped != want.Skipped ||
		rep.Errors != 0 || len(rep.Changed) != 1 || rep.Changed[0] != want.Changed[0] || len(rep.TopDenyReason) == 0 {
		t.Errorf("report = %+v\nwant counts of %+v", rep, want)
	}
	for _, key := range []string{`"evaluated"`, `"allow"`, `"simulated_deny"`, `"errors"`, `"timeouts"`, `"skipped"`, `"top_deny_reasons"`, `"changed"`} {
		if !strings.Contains(r.stdout, key) {
			t.Errorf("--output json has no %s key:\n%s", key, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "1 record skipped: no input") || !strings.Contains(r.stderr, "1 record ignored") {
		t.Errorf("stderr does not say what was skipped and ignored:\n%s", r.stderr)
	}

	r = run(t, tmp, "policy", "replay", cand, "--from", from)
	if r.code != 0 || !strings.Contains(r.stdout, "replay of revision") ||
		!strings.Contains(r.stdout, "would newly deny 1 orders:read for tenant acme") {
		t.Errorf("text report: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// The enforced policy itself changes nothing.
	r = run(t, tmp, "policy", "replay", pol, "--from", from)
	if r.code != 0 || !strings.Contains(r.stdout, "no decision would change") {
		t.Errorf("replay of the enforced policy: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestPolicyReplayBadInput(t *testing.T) {
	tmp := t.TempDir()
	rec := `{"decision_id":"d-1","tenant":"acme","action":"orders:read","allow":true,"reason":"policy-allow","input":{"action":"orders:read"}}`
	write := func(name, data string) string {
		p := filepath.Join(tmp, name)
		testkit.WriteFileMode(t, p, []byte(data), 0o644)
		return p
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"malformed line", []string{pol, "--from", write("bad.ndjson", rec+"\n\n{\"allow\": tru\n")}, "bad.ndjson:3: not a JSON object"},
		{"not a record", []string{pol, "--from", write("notrec.ndjson", rec+"\n{\"hello\":1}\n")}, "notrec.ndjson:2: not a decision record"},
		{"input of the wrong shape", []string{pol, "--from", write("shape.ndjson", `{"allow":true,"reason":"policy-allow","input":{"action":3}}`+"\n")},
			"shape.ndjson:1: the input is not a policy input"},
		{"missing file", []string{pol, "--from", filepath.Join(tmp, "nope.ndjson")}, "--from " + filepath.Join(tmp, "nope.ndjson") + ": no such file"},
		{"no --from", []string{pol}, "needs --from"},
		{"missing policy", []string{"testdata/nope", "--from", write("ok.ndjson", rec+"\n")}, "does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, tmp, append([]string{"policy", "replay"}, tt.args...)...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 saying %q", r.code, r.stderr, tt.want)
			}
		})
	}
}
