package main

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
)

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--version exited %d: %s", code, stderr.String())
	}
	if !regexp.MustCompile(`^svc-sidecar \d+\.\d+\.\d+\S*\n$`).MatchString(stdout.String()) {
		t.Errorf("--version printed %q, want \"svc-sidecar <dotted version>\"", stdout.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("--version wrote to stderr: %q", stderr.String())
	}
}

// TestUsageErrors: a command line that cannot be understood exits 2.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{"flag without its value", []string{"--config"}, "flag needs an argument: -config"},
		{"unexpected argument", []string{"serve"}, `svc-sidecar: unexpected argument "serve"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("run(%q) = %d, want 2", tc.args, code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestHelp: --help lists the flags, where the configuration file is
// looked up, the default listen addresses and every SVC_* variable.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{arg}, &stdout, &stderr); code != 0 {
				t.Errorf("%s exited %d, want 0", arg, code)
			}
			want := []string{"-config", "-version", "svc.toml in the working directory", "svc.example.toml",
				"[::1]:50051", "127.0.0.1:7700", "127.0.0.1:7701", "unix:///", "SIGHUP", "OTEL_EXPORTER_OTLP_ENDPOINT", "SVC_ENV=development", "GOGC"}
			for _, v := range config.EnvVars() {
				want = append(want, v.Name)
			}
			for _, w := range want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("help does not mention %s:\n%s", w, stdout.String())
				}
			}
			if stderr.Len() != 0 {
				t.Errorf("help wrote to stderr: %s", stderr.String())
			}
			// A key that a file may not set is not offered as one.
			for _, v := range config.EnvVars() {
				if v.EnvOnly && strings.Contains(stdout.String(), v.Key) {
					t.Errorf("help names %s as a key, but it is environment only (%s)", v.Key, v.Name)
				}
			}
			if !strings.Contains(stdout.String(), "(environment only)") {
				t.Errorf("help does not mark the environment-only variables")
			}
		})
	}
}

// TestBadConfig: a configuration the sidecar cannot start with exits 1
// with one line saying what is wrong and where, before serving anything.
func TestBadConfig(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		testkit.WriteFile(t, p, []byte(content))
		return p
	}
	// Listeners of a configuration that gets as far as binding: free
	// ports, and no audit output on the test's stdout.
	const listeners = "[sidecar]\nhttp_addr = \"127.0.0.1:0\"\n[audit]\ndestination = \"off\"\n"

	tests := []struct {
		name string
		path string
		want []string
	}{
		{"missing file", filepath.Join(dir, "absent.toml"), []string{"absent.toml", "cannot read"}},
		{"unknown extension", write("svc.ini", "x = 1\n"), []string{"svc.ini"}},
		{"TOML syntax error", write("syntax.toml", "[sdk\ntenant_id = \"acme\"\n"), []string{"syntax.toml:1"}},
		{"unknown key", write("unknown.toml", "[sdk]\njwks_ur = \"https://idp.example/jwks\"\n"), []string{"unknown.toml:2", "sdk.jwks_ur", "did you mean sdk.jwks_url?"}},
		{"missing policy directory", write("nopolicy.toml", "[policy]\ndir = \"/nonexistent/policies\"\n"+listeners),
			[]string{"policy.dir (" + filepath.Join(dir, "nopolicy.toml") + ":2)", "/nonexistent/policies does not exist"}},
		{"invalid value", write("value.toml", "[sdk]\nfail_mode = \"sideways\"\n"), []string{"value.toml", "sdk.fail_mode", `"sideways"`}},
		{"closed without an identity provider", write("closed.toml", "[sdk]\nfail_mode = \"closed\"\n"), []string{"sdk.fail_mode", "requires an identity source (sdk.jwks_url or sdk.saml or jwt.issuer_url or jwt.issuers or api_keys.file or client_certs.trust_domains or introspection.url or sdk.oidc)"}},
		{"YAML type error", write("svc.yaml", "sdk:\n  tenant_id: [1, 2]\n"), []string{"svc.yaml", "sdk.tenant_id"}},
		{"address in use", write("busy.toml", "[sdk]\nsidecar_addr = \""+busy.Addr().String()+"\"\n"+listeners),
			[]string{busy.Addr().String(), "sdk.sidecar_addr", "address already in use"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{"--config", tc.path}, &stdout, &stderr); code != 1 {
				t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
			}
			// Start-up logs may come first; the error is the last line.
			lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "svc-sidecar: ") {
				t.Fatalf("last line of stderr %q is not the error; stderr:\n%s", last, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(last, w) {
					t.Errorf("error %q does not mention %s", last, w)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestBadDefaultConfig: without --config, ./svc.toml is read, and a bad
// one is reported by name.
func TestBadDefaultConfig(t *testing.T) {
	dir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(dir, "svc.toml"), []byte("[sdk]\nfail_mode = \"maybe\"\n"))
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
	}
	want := "svc-sidecar: svc.toml:2: sdk.fail_mode: must be \"open\" or \"closed\", got \"maybe\"\n"
	if stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}
}

// TestMissingPolicyDirFromEnvironment: a policy directory set by
// SVC_POLICY_DIR that does not exist is reported with the variable.
func TestMissingPolicyDirFromEnvironment(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("SVC_POLICY_DIR", "/nonexistent/policies")
	t.Setenv("SVC_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("SVC_SIDECAR_ADDR", "127.0.0.1:0")
	t.Setenv("SVC_AUDIT_DESTINATION", "off")
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
	}
	want := "svc-sidecar: policy.dir (SVC_POLICY_DIR): policy directory /nonexistent/policies does not exist\n"
	if got := stderr.String(); !strings.HasSuffix(got, want) {
		t.Errorf("stderr = %q, want it to end with %q", got, want)
	}
}

// TestBadEnvironment: an SVC_* variable overrides the file, and a bad one
// is reported by the variable's name.
func TestBadEnvironment(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("SVC_FAIL_MODE", "maybe")
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
	}
	if got := stderr.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "svc-sidecar: SVC_FAIL_MODE: ") {
		t.Errorf("stderr = %q, want one line naming SVC_FAIL_MODE", got)
	}
}

// TestSeveralProblems: each problem of a configuration is a line of its
// own, and every line names the program.
func TestSeveralProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "svc.toml")
	testkit.WriteFile(t, path, []byte("[sdk]\nfail_mode = \"x\"\nsidecar_addr = \"nope\"\n"))
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--config", path}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit code %d, want 1; stderr:\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("stderr has %d lines, want one per problem (2):\n%s", len(lines), stderr.String())
	}
	for i, want := range []struct{ line, key string }{{"3", "sdk.sidecar_addr"}, {"2", "sdk.fail_mode"}} {
		if !strings.HasPrefix(lines[i], "svc-sidecar: "+path+":"+want.line+": ") || !strings.Contains(lines[i], want.key) {
			t.Errorf("line %d = %q, want the program, the file, line %s and %s", i+1, lines[i], want.line, want.key)
		}
	}
}

// With [sdk.saml] and no token signing key file, the sidecar serves SAML
// with a generated key and says that its tokens die with the process.
func TestSAMLGeneratedKeyWarns(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "svc.toml")
	toml := `[sdk]
sidecar_addr = "127.0.0.1:0"

[sdk.saml]
entity_id = "https://app.example.com/auth/saml/metadata"
acs_url = "https://app.example.com/auth/saml/acs"
idp_metadata_url = "https://idp.example.com/saml/metadata"

[sidecar]
http_addr = "127.0.0.1:0"
saml_addr = "127.0.0.1:0"

[audit]
destination = "off"
`
	testkit.WriteFile(t, cfg, []byte(toml))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve starts, sees the ended context and shuts down
	var stderr bytes.Buffer
	if err := serve(ctx, cfg, &stderr); err != nil {
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "do not survive a restart") {
		t.Fatalf("no warning about the generated token signing key in:\n%s", stderr.String())
	}
}

// TestSAMLSubcommands: svc-sidecar saml runs core's saml commands (the
// comparison of the two programs is e2e's TestSAMLCommandsSameInBothPrograms);
// --config before "saml" is the config of the command.
func TestSAMLSubcommands(t *testing.T) {
	dir := t.TempDir()
	idp := filepath.Join(dir, "idp")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"saml", "test-assertion", "--idp-dir", idp, "--metadata"}, &stdout, &stderr); code != 0 {
		t.Fatalf("saml test-assertion --metadata: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "<md:EntityDescriptor") && !strings.Contains(stdout.String(), "EntityDescriptor") {
		t.Errorf("stdout is not IdP metadata: %.200s", stdout.String())
	}
	cfg := filepath.Join(dir, "svc.toml")
	testkit.WriteFile(t, cfg, []byte("[sdk]\ntenant_id = \"acme\"\n[sdk.saml]\nentity_id = \"urn:sp\"\nacs_url = \"https://sp.example/acs\"\nidp_metadata_file = \"/nonexistent\"\n"))
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"--config", cfg, "saml", "metadata"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--config <file> saml metadata: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `entityID="urn:sp"`) {
		t.Errorf("SP metadata does not carry the configured entity id: %.300s", stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"saml", "test-assertion", "--idp-dir", idp}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "svc-sidecar: --email and --tenant are required") {
		t.Errorf("missing --email: exit %d, stderr %q", code, stderr.String())
	}
}
