package e2e

import (
	"maps"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit/samltest"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
)

// TestConfigValidateAgreesWithTheSidecar: for each configuration file,
// `core config validate` says valid exactly when svc-sidecar started on
// the same file serves. The file lives in a directory of its own and the
// sidecar runs elsewhere, so relative paths resolve against the file in
// both.
func TestConfigValidateAgreesWithTheSidecar(t *testing.T) {
	core := harness.Binary(t, "core")
	policy := repoFile(t, "policies", "authz.rego")
	tests := []struct {
		name, config string
		files        map[string]string
		valid        bool
	}{
		{"policy directory beside the file", "[policy]\ndir = \"pol\"\n", map[string]string{"pol/authz.rego": string(policy)}, true},
		{"embedded default policy", "[log]\nlevel = \"info\"\n", nil, true},
		{"no policy directory", "[policy]\ndir = \"pol\"\n", nil, false},
		{"policy that does not compile", "[policy]\ndir = \"pol\"\n", map[string]string{"pol/x.rego": "package svc.authz\nallow if {\n"}, false},
		{"policy of another package only", "[policy]\ndir = \"pol\"\n", map[string]string{"pol/x.rego": "package other\nallow := true\n"}, false},
		{"missing TLS files", "[sidecar]\ntls_cert_file = \"tls.crt\"\ntls_key_file = \"tls.key\"\n", nil, false},
		{"TLS files that are not PEM", "[sidecar]\ntls_cert_file = \"tls.crt\"\ntls_key_file = \"tls.key\"\n",
			map[string]string{"tls.crt": "not a certificate", "tls.key": "not a key"}, false},
		{"closed without an identity source", "[sdk]\nfail_mode = \"closed\"\n", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkAgreement(t, core, tc.config, tc.files, nil, tc.valid)
		})
	}
}

// TestConfigValidateAgreesOnEveryFileSetting: every setting that names a
// file or directory (config.PathKeys) pointed at one that does not
// exist: `core config validate` refuses exactly what svc-sidecar refuses
// at start (a file it reads), and both accept a directory the sidecar
// creates. A path setting added later without a row here fails the test.
func TestConfigValidateAgreesOnEveryFileSetting(t *testing.T) {
	core := harness.Binary(t, "core")
	idp := samltest.New(t)
	signin := harness.FreeAddr(t)
	saml := "[sdk.saml]\nentity_id = \"http://" + signin + "/auth/saml/metadata\"\nacs_url = \"http://" + signin +
		"/auth/saml/acs\"\n"
	mdFile := map[string]string{"idp.xml": string(idp.Metadata())}
	env := map[string]string{"SVC_SAML_ADDR": signin}
	oidc := "[sdk.oidc]\nissuer_url = \"http://127.0.0.1:1/\"\nclient_id = \"svc\"\nredirect_url = \"http://" + signin +
		"/auth/oidc/callback\"\n"
	jwks := "[sdk]\njwks_url = \"http://127.0.0.1:1/jwks.json\"\n"
	bundle := "[policy]\nbundle_url = \"http://127.0.0.1:1/bundle.tar.gz\"\n"
	_, pub := testkit.ECKeyPEM(t)
	keyFile := map[string]string{"key.pem": string(pub)}
	sink := func(kind, url string) string {
		return "[decision_log]\nsink = \"" + kind + "\"\nurl = \"" + url + "\"\nspool_dir = \"spool\"\n"
	}
	tests := []struct {
		key, config string
		files       map[string]string
		valid       bool
		// env adds to (or, empty, removes from) the harness's variables,
		// which set some path settings themselves.
		env map[string]string
	}{
		{"sdk.saml.idp_metadata_file", saml + "idp_metadata_file = \"nope.xml\"\n", nil, false, nil},
		{"sdk.saml.idp_metadata_signing_certificate_file", saml + "idp_metadata_file = \"idp.xml\"\nidp_metadata_signing_certificate_file = \"nope.pem\"\n", mdFile, false, nil},
		{"sdk.saml.sp_private_key_file", saml + "idp_metadata_file = \"idp.xml\"\nsp_private_key_file = \"nope.key\"\nsp_certificate_file = \"nope.crt\"\n", mdFile, false, nil},
		{"sdk.saml.sp_certificate_file", saml + "idp_metadata_file = \"idp.xml\"\nsp_private_key_file = \"idp.xml\"\nsp_certificate_file = \"nope.crt\"\n", mdFile, false, nil},
		{"sdk.saml.token_signing_key_file", saml + "idp_metadata_file = \"idp.xml\"\ntoken_signing_key_file = \"nope.pem\"\n", mdFile, false, nil},
		{"sdk.session.token_signing_key_file", saml + "idp_metadata_file = \"idp.xml\"\n[sdk.session]\ntoken_signing_key_file = \"nope.pem\"\n", mdFile, false, nil},
		{"sdk.oidc.client_secret_file", oidc + "client_secret_file = \"nope\"\n", nil, false, nil},
		{"sdk.dev_issuer_dir", "[sdk]\ndev_issuer_dir = \"dev-issuer\"\n", nil, true, map[string]string{"SVC_DEV_ISSUER_DIR": ""}},
		{"policy.dir", "[policy]\ndir = \"nope\"\n", nil, false, nil},
		{"policy.bundle_verify_key_file", bundle + "bundle_verify_key_file = \"nope.pem\"\n", nil, false, nil},
		{"policy.bundle_verify_key_file", bundle + "bundle_verify_key_file = \"idp.xml\"\n", mdFile, false, nil},
		{"policy.bundle_cache_dir", bundle + "bundle_verify_key_file = \"key.pem\"\nbundle_cache_dir = \"cache\"\n", keyFile, true, nil},
		{"policy.bundle_token_file", bundle + "bundle_verify_key_file = \"key.pem\"\nbundle_token_file = \"nope\"\n", keyFile, false, nil},
		{"api_keys.file", "[api_keys]\nfile = \"nope.toml\"\n", nil, false, nil},
		{"identity_token.signing_key_file", jwks + "[identity_token]\nsigning_key_file = \"nope.pem\"\n", nil, false, nil},
		{"introspection.client_secret_file", jwks + "[introspection]\nurl = \"http://127.0.0.1:1/introspect\"\nclient_id = \"svc\"\nclient_secret_file = \"nope\"\n", nil, false, nil},
		{"sidecar.admin_token_file", "[sidecar]\nadmin_token_file = \"nope\"\n", nil, false, nil},
		{"sidecar.tls_cert_file", "[sidecar]\ntls_cert_file = \"nope.crt\"\ntls_key_file = \"nope.key\"\n", nil, false, nil},
		{"sidecar.tls_key_file", "[sidecar]\ntls_cert_file = \"idp.xml\"\ntls_key_file = \"nope.key\"\n", mdFile, false, nil},
		{"sidecar.tls_client_ca_file", "[sidecar]\ntls_client_ca_file = \"nope.pem\"\n", nil, false, nil},
		{"sidecar.state_dir", "[sidecar]\nstate_dir = \"state\"\n", nil, true, map[string]string{"SVC_STATE_DIR": ""}},
		{"audit.destination", "[audit]\ndestination = \"nope/audit.jsonl\"\n", nil, false, map[string]string{"SVC_AUDIT_DESTINATION": ""}},
		{"decision_log.spool_dir", sink("http", "http://127.0.0.1:1/decisions"), nil, true, nil},
		{"decision_log.kafka_sasl_password_file", sink("kafka", "kafka://127.0.0.1:1") +
			"kafka_sasl_mechanism = \"PLAIN\"\nkafka_sasl_username = \"svc\"\nkafka_sasl_password_file = \"nope\"\n", nil, false, nil},
		{"decision_log.tls_ca_file", sink("http", "https://127.0.0.1:1/decisions") + "tls_ca_file = \"nope.pem\"\n", nil, false, nil},
		{"decision_log.http_token_file", sink("http", "http://127.0.0.1:1/decisions") + "http_token_file = \"nope\"\n", nil, false, nil},
		{"rate_limit.redis_password_file", "[rate_limit]\nredis_addr = \"127.0.0.1:1\"\nredis_password_file = \"nope\"\n", nil, false, nil},
		{"rate_limit.redis_tls_ca_file", "[rate_limit]\nredis_addr = \"127.0.0.1:1\"\nredis_tls = true\nredis_tls_ca_file = \"nope.pem\"\n", nil, false, nil},
	}
	covered := map[string]bool{}
	for _, tc := range tests {
		covered[tc.key] = true
		t.Run(tc.key, func(t *testing.T) {
			checkAgreement(t, core, tc.config, tc.files, with(env, tc.env), tc.valid)
		})
	}
	for _, key := range config.PathKeys() {
		if !covered[key] {
			t.Errorf("path setting %s has no row: add one that points it at a missing file", key)
		}
	}
}

// TestConfigValidateAgreesOnShippedConfigs: the configurations the
// repository ships and its tests read as valid are judged alike by `core
// config validate` and svc-sidecar.
func TestConfigValidateAgreesOnShippedConfigs(t *testing.T) {
	core := harness.Binary(t, "core")
	root := harness.ModuleRoot(t)
	paths := []string{filepath.Join(root, "svc.example.toml"), filepath.Join(root, "svc.example.yaml")}
	for _, glob := range []string{"cmd/core/testdata/config/*.toml", "cmd/core/testdata/config/*.yaml", "engine/config/testdata/*.toml", "engine/config/testdata/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, m...)
	}
	if len(paths) < 5 {
		t.Fatalf("found only %d configurations: %v", len(paths), paths)
	}
	for _, path := range paths {
		t.Run(strings.TrimPrefix(path, root+"/"), func(t *testing.T) {
			valid, out := validates(t, core, path)
			served, stderr := sidecarServes(t, path, nil)
			if valid != served {
				t.Errorf("core config validate valid=%v, svc-sidecar served=%v\nvalidate:\n%s\nsidecar:\n%s", valid, served, out, stderr)
			}
		})
	}
}

// checkAgreement writes config (and files) to a directory of its own and
// asserts that `core config validate` and svc-sidecar (with env) both
// accept it, when valid, or both refuse it.
func checkAgreement(t *testing.T, core, config string, files, env map[string]string, want bool) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		harness.WriteFile(t, dir, name, body)
	}
	path := harness.WriteFile(t, dir, "svc.toml", config)

	valid, out := validates(t, core, path)
	served, stderr := sidecarServes(t, path, env)
	if valid != served || valid != want {
		t.Errorf("core config validate valid=%v, svc-sidecar served=%v, want both %v\nvalidate:\n%s\nsidecar:\n%s",
			valid, served, want, out, stderr)
	}
}

// validates runs `core config validate` on the file at path and reports
// whether it says valid (exit 0; 1 is invalid, anything else fails the
// test), with its output.
func validates(t *testing.T, core, path string) (bool, []byte) {
	t.Helper()
	cmd := exec.Command(core, "config", "validate", path)
	cmd.Env = harness.ChildEnv(nil)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() != 1 {
		t.Fatalf("core config validate exited %d:\n%s", ee.ExitCode(), out)
	}
	return err == nil, out
}

// with is base with the entries of extra.
func with(base, extra map[string]string) map[string]string {
	out := maps.Clone(base)
	maps.Copy(out, extra)
	return out
}

// sidecarServes starts svc-sidecar on the configuration file at path and
// reports whether it serves, with its standard error.
func sidecarServes(t *testing.T, path string, env map[string]string) (bool, string) {
	t.Helper()
	s := harness.LaunchSidecar(t, harness.SidecarOptions{Args: []string{"--config", path}, Env: env})
	_, err := s.WaitOutput(t, true, 30*time.Second, func(out string) bool {
		return strings.Contains(out, `"msg":"svc-sidecar serving"`)
	})
	if err == nil {
		s.Stop(t)
	}
	return err == nil, s.Stderr.String()
}
