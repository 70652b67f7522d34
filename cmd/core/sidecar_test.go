package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/sidecar"
)

// startSidecar runs a real sidecar in development mode on free ports,
// verifying bundles with verifyKeyPEM when it is set, and returns the URL
// of its HTTP API.
func startSidecar(t *testing.T, verifyKeyFile string) string {
	t.Helper()
	cfg := devConfig()
	cfg.Policy.BundleVerifyKeyFile = verifyKeyFile
	return startSidecarWith(t, cfg)
}

func devConfig() config.Config {
	var cfg config.Config
	cfg.SDK.SidecarAddr, cfg.Sidecar.HTTPAddr, cfg.SDK.TenantID = "127.0.0.1:0", "127.0.0.1:0", "acme"
	cfg.Audit.Destination = config.AuditOff
	return cfg
}

func startSidecarWith(t *testing.T, cfg config.Config) string {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	eng, err := engine.New(cfg, engine.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	srv, err := sidecar.New(sidecar.Deps{Engine: eng, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + srv.HTTPAddr().String()
}

// closedURL is the URL of a port nothing listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestSidecarStatus(t *testing.T) {
	url := startSidecar(t, "")
	r := run(t, "", "--sidecar", url, "sidecar", "status")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, label := range []string{"Status:", "Partitioned:", "Last sync:", "Cache valid:", "Cache age:",
		"Policies loaded:", "Policy mode:", "JWKS key sets cached:", "Uptime:", "Version:"} {
		if !strings.Contains(r.stdout, label) {
			t.Errorf("status lacks %q:\n%s", label, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^Version:\s+\d+\.\d+\.\d+`).MatchString(r.stdout) {
		t.Errorf("no dotted version:\n%s", r.stdout)
	}

	r = run(t, "", "--sidecar", url, "--output", "json", "sidecar", "status")
	if r.code != 0 {
		t.Fatalf("--output json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("--output json: %v\n%s", err, r.stdout)
	}
	for _, field := range []string{"status", "partitioned", "cache_valid", "policies_loaded", "policy_revision", "jwks_key_sets_cached", "uptime", "version"} {
		if _, ok := doc[field]; !ok {
			t.Errorf("JSON status lacks %q: %s", field, r.stdout)
		}
	}
}

// TestSidecarStatusWarnsEphemeralSAMLKey: a sidecar whose SAML token key
// was generated at start (saml.token_key_ephemeral) gets a warning line.
func TestSidecarStatusWarnsEphemeralSAMLKey(t *testing.T) {
	for _, ephemeral := range []bool{true, false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"status":"healthy","ready":true,"policies_loaded":1,"uptime":"1s","version":"0.1.0","saml":{"token_key_generated":true,"token_key_ephemeral":%t}}`, ephemeral)
		}))
		r := run(t, "", "--sidecar", srv.URL, "sidecar", "status")
		srv.Close()
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		warned := regexp.MustCompile(`(?m)^Warning:\s+SAML sessions are ephemeral`).MatchString(r.stdout)
		if warned != ephemeral {
			t.Errorf("token_key_ephemeral=%t: warning shown %t:\n%s", ephemeral, warned, r.stdout)
		}
	}
}

// TestSidecarStatusDecisionLog: with a decision log, the status shows its
// sink, backlog and losses on one line; without, no line.
func TestSidecarStatusDecisionLog(t *testing.T) {
	for _, tt := range []struct{ log, want string }{
		{`,"decision_log":{"sink":"nats","connected":false,"spool_bytes":4096,"unsent":3,"oldest_unsent_age":"2.5s","shipped":90,"retries":4,"dropped":0,"refused":7,"last_error":"decision log nats: not connected"}`,
			`(?m)^Decision log:\s+nats, not connected, 3 unsent \(oldest 2\.5s\), 90 shipped, 4 retries, 0 dropped, 7 refused; last error: decision log nats: not connected$`},
		{``, ``},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"status":"healthy","ready":true,"policies_loaded":1,"uptime":"1s","version":"0.1.0"%s}`, tt.log)
		}))
		r := run(t, "", "--sidecar", srv.URL, "sidecar", "status")
		srv.Close()
		if r.code != 0 {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if tt.want == "" {
			if strings.Contains(r.stdout, "Decision log:") {
				t.Errorf("a decision log line without a decision log:\n%s", r.stdout)
			}
			continue
		}
		if !regexp.MustCompile(tt.want).MatchString(r.stdout) {
			t.Errorf("no line matching %s:\n%s", tt.want, r.stdout)
		}
	}
}

// TestSidecarStatusBundleRecord: the record of the last accepted bundle
// is printed with its file, and a sidecar without a state directory, or
// one that cannot write it, gets a warning line.
func TestSidecarStatusBundleRecord(t *testing.T) {
	tests := []struct {
		name, state string
		want        []string
		notWant     string
	}{
		{"recorded", `{"file":"/var/lib/svc/policy-bundle-0123456789abcdef.json","revision":"cp-2","created_at":"2026-11-27T12:00:00Z"}`,
			[]string{`(?m)^Last bundle accepted:\s+revision cp-2, created 2026-11-27T12:00:00Z \(/var/lib/svc/policy-bundle-0123456789abcdef\.json\)$`}, "Warning:"},
		{"no state directory", `{"file":""}`, []string{`(?m)^Warning:\s+no state directory: .*sidecar\.state_dir$`}, "Last bundle accepted:"},
		{"write failed", `{"file":"/var/lib/svc/policy-bundle-0123456789abcdef.json","revision":"cp-2","last_error":"no space left on device"}`,
			[]string{`(?m)^Last bundle accepted:\s+revision cp-2 \(`, `(?m)^Warning:\s+the record of the last bundle accepted: no space left on device$`}, "no state directory"},
		{"no verification key", ``, nil, "Last bundle accepted:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := ""
			if tt.state != "" {
				state = `,"policy_state":` + tt.state
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"status":"healthy","ready":true,"policies_loaded":1,"uptime":"1s","version":"0.1.0"%s}`, state)
			}))
			defer srv.Close()
			r := run(t, "", "--sidecar", srv.URL, "sidecar", "status")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			for _, re := range tt.want {
				if !regexp.MustCompile(re).MatchString(r.stdout) {
					t.Errorf("no line matching %s:\n%s", re, r.stdout)
				}
			}
			if strings.Contains(r.stdout, tt.notWant) {
				t.Errorf("%q printed:\n%s", tt.notWant, r.stdout)
			}
		})
	}
}

// TestSidecarStatusWarnsSignatureCheckDisabled: a sidecar that does not
// verify SAML signatures (SVC_ENV=development) gets a warning line.
func TestSidecarStatusWarnsSignatureCheckDisabled(t *testing.T) {
	for _, off := range []bool{true, false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"status":"degraded","reason":"saml-signature-check-disabled","ready":true,"policies_loaded":1,"uptime":"1s","version":"0.1.0","saml":{"signature_check_disabled":%t}}`, off)
		}))
		r := run(t, "", "--sidecar", srv.URL, "sidecar", "status")
		srv.Close()
		if r.code != 1 { // it answers, degraded
			t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
		}
		warned := regexp.MustCompile(`(?m)^Warning:\s+SAML signatures are NOT verified`).MatchString(r.stdout)
		if warned != off {
			t.Errorf("signature_check_disabled=%t: warning shown %t:\n%s", off, warned, r.stdout)
		}
	}
}

// TestSidecarUnreachable: every command that talks to the sidecar exits 3
// and names the URL when nothing answers.
func TestSidecarUnreachable(t *testing.T) {
	url := closedURL(t)
	tmp := workspace(t)
	for _, args := range [][]string{
		{"sidecar", "status"},
		{"--output", "json", "sidecar", "status"},
		{"sidecar", "reload-policy", "--bundle", "$TMP/signed.tar.gz"},
		{"sidecar", "restart"},
		{"--output", "json", "sidecar", "restart", "--drain-timeout", "5"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := run(t, tmp, append([]string{"--sidecar", url}, args...)...)
			if r.code != exitUnreachable || !strings.Contains(r.stderr, url) || !strings.Contains(r.stderr, "connection refused") {
				t.Errorf("exit %d, stderr %q; want 3 naming %s", r.code, r.stderr, url)
			}
			if jsonArgs(args) {
				checkOneJSON(t, r.stdout)
			}
		})
	}
}

// TestReloadPolicy uploads bundles to a sidecar that verifies them: the
// signed one is activated and its revision printed; an unsigned one or one
// signed by another key exits 1 and the revision stays.
func TestReloadPolicy(t *testing.T) {
	tmp := workspace(t)
	url := startSidecar(t, filepath.Join(tmp, "ec.pub"))
	revision := func() string {
		r := run(t, "", "--sidecar", url, "--output", "json", "sidecar", "status")
		var st struct {
			Revision string `json:"policy_revision"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status: %v\n%s", err, r.stdout)
		}
		return st.Revision
	}
	initial := revision()
	if r := run(t, tmp, "policy", "bundle", "--dir", pol, "--sign-key", "$TMP/rsa.pem", "--output", "$TMP/other.tar.gz"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r := run(t, tmp, "policy", "bundle", "--dir", pol, "--sign-key", "$TMP/ec.pem", "--revision", "r-new", "--output", "$TMP/new.tar.gz"); r.code != 0 {
		t.Fatal(r.stderr)
	}

	steps := []struct {
		name     string
		args     []string
		code     int
		out      string
		revision string
	}{
		{"unsigned", []string{"sidecar", "reload-policy", "--bundle", "$TMP/unsigned.tar.gz"}, 1, "422 bundle-signature-invalid: bundle rejected: signature invalid: bundle is not signed", initial},
		{"another key", []string{"sidecar", "reload-policy", "--bundle", "$TMP/other.tar.gz"}, 1, "422 bundle-signature-invalid", initial},
		{"tampered", []string{"sidecar", "reload-policy", "--bundle", "$TMP/tampered.tar.gz"}, 1, "does not verify with the sidecar's policy.bundle_verify_key_file; the active policy stays", initial},
		{"unsigned, json", []string{"--output", "json", "sidecar", "reload-policy", "--bundle", "$TMP/unsigned.tar.gz"}, 1, "bundle-signature-invalid", initial},
		{"missing file", []string{"sidecar", "reload-policy", "--bundle", "$TMP/nope.tar.gz"}, 2, "nope.tar.gz", initial},
		{"signed", []string{"sidecar", "reload-policy", "--bundle", "$TMP/new.tar.gz"}, 0, "policy revision r-new active", "r-new"},
		{"signed, json", []string{"--output", "json", "sidecar", "reload-policy", "--bundle", "$TMP/new.tar.gz"}, 0, `"revision": "r-new"`, "r-new"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			r := run(t, tmp, append([]string{"--sidecar", url}, s.args...)...)
			if r.code != s.code || !strings.Contains(r.stdout+r.stderr, s.out) {
				t.Errorf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", r.code, s.code, s.out, r.stdout, r.stderr)
			}
			if jsonArgs(s.args) {
				checkOneJSON(t, r.stdout)
			}
			if got := revision(); got != s.revision {
				t.Errorf("policy_revision = %q, want %q", got, s.revision)
			}
		})
	}
}

// TestConfigDiffLive compares files with the live configuration of a
// running sidecar.
func TestConfigDiffLive(t *testing.T) {
	cfg := devConfig()
	cfg.SDK.JWKSURL = ""
	cfg.Tenants = map[string]config.Tenant{"acme": {Plan: "team"}}
	url := startSidecarWith(t, cfg)
	dir := t.TempDir()
	cfg.SetDefaults()
	same, err := cfg.MarshalTOML()
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		testkit.WriteFile(t, p, b)
		return p
	}
	sameFile := write("same.toml", same)
	changedFile := write("changed.toml", bytes.Replace(same, []byte(`plan = 'team'`), []byte(`plan = 'enterprise'`), 1))

	tests := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"equal", []string{"config", "diff", sameFile, "--live", url}, 0, "equal"},
		{"different", []string{"config", "diff", changedFile, "--live", url}, 1, `+tenants.acme.plan = "team"`},
		{"different, json", []string{"--output", "json", "config", "diff", changedFile, "--live", url}, 1, `"key": "tenants.acme.plan"`},
		{"unreachable", []string{"config", "diff", sameFile, "--live", closedURL(t)}, 2, "connection refused (is svc-sidecar running? set --live)"},
		{"not a URL", []string{"config", "diff", sameFile, "--live", "localhost:7700"}, 2, "invalid --live"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, "", tc.args...)
			if r.code != tc.code || !strings.Contains(r.stdout+r.stderr, tc.out) {
				t.Errorf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, tc.out, r.stdout, r.stderr)
			}
			if jsonArgs(tc.args) {
				checkOneJSON(t, r.stdout)
			}
		})
	}
}

// TestReloadPolicyHelpSaysWhenUnsignedIsActivated: the help must not
// promise that an unsigned bundle is never activated; without a verify
// key, development mode activates one.
func TestReloadPolicyHelpSaysWhenUnsignedIsActivated(t *testing.T) {
	r := run(t, "", "sidecar", "reload-policy", "--help")
	help := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{"Without policy.bundle_verify_key_file", "development mode", "an unsigned one too", "refuses every bundle"} {
		if !strings.Contains(help, want) {
			t.Errorf("reload-policy --help does not say %q:\n%s", want, r.stdout)
		}
	}
}
