package e2e

import (
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// exitTimeout bounds how long a sidecar that cannot start may take to
// exit.
const exitTimeout = 15 * time.Second

// TestStartupFailures checks that a sidecar that cannot start exits
// non-zero, quickly, with a message naming what is wrong.
func TestStartupFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		env    map[string]string
		args   []string
		// occupy names the env variable whose address is taken by another
		// listener before the start.
		occupy string
		// want are substrings of stderr (case-insensitive).
		want []string
		// oneLine: the error is the only line on stderr.
		oneLine bool
	}{
		{name: "fail_mode closed without jwks_url",
			config: "[sdk]\nfail_mode = \"closed\"\n",
			want:   []string{"jwks_url"}, oneLine: true},
		{name: "SVC_FAIL_MODE closed without jwks_url",
			env:  map[string]string{"SVC_FAIL_MODE": "closed"},
			want: []string{"jwks_url"}, oneLine: true},
		{name: "unknown fail mode",
			env:  map[string]string{"SVC_FAIL_MODE": "sometimes"},
			want: []string{"SVC_FAIL_MODE"}, oneLine: true},
		{name: "unknown key in svc.toml",
			config: "[sdk]\ntenant = \"acme\"\n",
			want:   []string{"sdk.tenant"}, oneLine: true},
		{name: "public http JWKS URL",
			env:  map[string]string{"SVC_JWKS_URL": "http://idp.example.com/jwks.json"},
			want: []string{"jwks_url"}, oneLine: true},
		{name: "missing --config file",
			args: []string{"--config", "/nonexistent/svc.toml"},
			want: []string{"/nonexistent/svc.toml"}, oneLine: true},
		{name: "gRPC address in use", occupy: "SVC_SIDECAR_ADDR",
			want: []string{"in use"}},
		{name: "HTTP address in use", occupy: "SVC_HTTP_ADDR",
			want: []string{"in use"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range tc.env {
				env[k] = v
			}
			var taken string
			if tc.occupy != "" {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close() })
				taken = l.Addr().String()
				env[tc.occupy] = taken
			}
			s := harness.LaunchSidecar(t, harness.SidecarOptions{Config: tc.config, Env: env, Args: tc.args})
			code := s.Wait(t, exitTimeout)
			stderr := strings.TrimSpace(s.Stderr.String())
			if code == 0 {
				t.Fatalf("sidecar exited 0, want a non-zero exit; stderr:\n%s", stderr)
			}
			if code < 0 {
				t.Fatalf("sidecar did not exit by itself (code %d); stderr:\n%s", code, stderr)
			}
			want := tc.want
			if taken != "" {
				want = append(want, taken)
			}
			for _, w := range want {
				if !strings.Contains(strings.ToLower(stderr), strings.ToLower(w)) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
			if lines := strings.Split(stderr, "\n"); tc.oneLine && len(lines) != 1 {
				t.Errorf("stderr has %d lines, want the error alone on one line:\n%s", len(lines), stderr)
			}
		})
	}
}

// TestVersion checks --version: a dotted version on stdout, exit 0.
func TestVersion(t *testing.T) {
	t.Parallel()
	bin := harness.Binary(t, "svc-sidecar")
	cmd := exec.Command(bin, "--version")
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("svc-sidecar --version: %v", err)
	}
	if !regexp.MustCompile(`\b\d+\.\d+\.\d+\b`).Match(out) {
		t.Errorf("--version printed %q, want a dotted version", out)
	}
}

// TestConfigSources checks where the configuration comes from: svc.toml
// in the working directory, --config, and SVC_* variables over both. The
// tenant a token must belong to tells which value won.
func TestConfigSources(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	initech := "[sdk]\ntenant_id = \"initech\"\n"

	tests := []struct {
		name       string
		opts       harness.SidecarOptions
		wantTenant string
	}{
		{"svc.toml in the working directory",
			harness.SidecarOptions{Config: initech, Env: map[string]string{"SVC_TENANT_ID": ""}}, "initech"},
		{"--config",
			harness.SidecarOptions{Config: initech, ConfigFlag: true, Env: map[string]string{"SVC_TENANT_ID": ""}}, "initech"},
		{"SVC_TENANT_ID overrides the file",
			harness.SidecarOptions{Config: initech, Env: map[string]string{"SVC_TENANT_ID": "acme"}}, "acme"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.Env["SVC_JWKS_URL"] = k.jwks.URL
			s := harness.StartSidecar(t, tc.opts)
			for _, tenant := range []string{"initech", "acme"} {
				r := envoyCheck(t, s, "GET", "/orders/1", k.token(t, "alice", tenant, "viewer"), nil)
				want := 403
				if tenant == tc.wantTenant {
					want = 200
				}
				if r.status != want {
					t.Errorf("token of tenant %s: status %d, want %d; body %s", tenant, r.status, want, r.body)
				}
			}
		})
	}
}

// TestDevelopmentMode checks the sidecar without an identity source (no
// jwks_url, no [sdk.saml]): it accepts any bearer string as anonymous and
// says so loudly at start.
func TestDevelopmentMode(t *testing.T) {
	t.Parallel()
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: "[sdk]\ntenant_id = \"acme\"\n"})

	v := validate(t, s, "any-string-at-all")
	if !v.GetAllowed() || v.GetReason() != "dev-anonymous" || v.GetSubject() != "anonymous" {
		t.Errorf("ValidateToken = allowed %v reason %q subject %q, want true dev-anonymous anonymous",
			v.GetAllowed(), v.GetReason(), v.GetSubject())
	}
	if v.GetClaims() != nil {
		t.Errorf("development mode returned claims %v, want none", v.GetClaims())
	}
	if v := validate(t, s, ""); v.GetAllowed() || v.GetReason() != "token-missing" {
		t.Errorf("empty token: allowed %v reason %q, want false token-missing", v.GetAllowed(), v.GetReason())
	}

	loud := false
	for _, rec := range s.LogRecords(t) {
		level, _ := rec["level"].(string)
		if level == "WARN" || level == "ERROR" {
			loud = true
		}
	}
	if !loud {
		t.Errorf("development mode was not logged at WARN or above:\n%s", s.Stderr.String())
	}
}
