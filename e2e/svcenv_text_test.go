package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// What svc-sidecar --help and docs/configuration.md say of
// SVC_ENV=development, and what the sidecar does with it, in one test.
// Each listener the texts name is put on every interface in turn, and
// each identity source besides [sdk.saml] is set, with [sdk.saml] and
// without: every one of these starts is refused, naming SVC_ENV and the
// listener or setting. The texts must name every listener and identity
// source the configuration has, so that a new one cannot be left out of
// the words while the rule covers it, or the reverse. In a local trial
// the sidecar starts, with sdk.fail_mode closed too, and its status is
// degraded with the reason the row names.
func TestSVCEnvDoesWhatItsTextSays(t *testing.T) {
	sidecar := harness.Binary(t, "svc-sidecar")
	out, err := exec.Command(sidecar, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("svc-sidecar --help: %v\n%s", err, out)
	}
	help := paragraphAfter(t, string(out), "  SVC_ENV=development\n")
	docs := repoFile(t, "docs", "configuration.md")
	row := ""
	for line := range strings.Lines(string(docs)) {
		if strings.HasPrefix(line, "| `SVC_ENV` |") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/configuration.md has no SVC_ENV row")
	}

	var all config.Config
	all.SDK.SAML = &config.SAML{}
	var listeners []string
	for _, l := range all.Listeners() {
		listeners = append(listeners, l.Key)
	}
	var sources []string
	for _, k := range config.IdentitySourceKeys() {
		if k != config.SAMLSource {
			sources = append(sources, k)
		}
	}
	addrKey := regexp.MustCompile(`\b(?:sdk|sidecar)\.[a-z_]+_addr\b`)
	for name, text := range map[string]string{"svc-sidecar --help": help, "docs/configuration.md": row} {
		named := slices.Compact(slices.Sorted(slices.Values(addrKey.FindAllString(text, -1))))
		if want := slices.Sorted(slices.Values(listeners)); !slices.Equal(named, want) {
			t.Errorf("%s names the listeners %v; the sidecar has %v", name, named, want)
		}
		for _, want := range append([]string{"SAML signature verification", "loopback address", "Unix socket", "[sdk.saml]",
			"refuses to start", "SIGHUP keeps the running configuration"}, sources...) {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not say %q:\n%s", name, want, text)
			}
		}
	}
	if !strings.Contains(row, "saml-signature-check-disabled") || !strings.Contains(row, "sdk.fail_mode") {
		t.Errorf("the docs row no longer names the status reason or sdk.fail_mode:\n%s", row)
	}

	idp := exampleIdP(t)
	jwks := harness.StartJWKS(t, harness.NewECSigner(t, "idp"))
	keysFile := filepath.Join(t.TempDir(), "api-keys.toml")
	testkit.WriteFile(t, keysFile, []byte("# no key yet\n"))
	oidc := idptest.New(t)
	sourceEnv := map[string][2]string{
		"sdk.jwks_url":   {"SVC_JWKS_URL", jwks.URL},
		"jwt.issuer_url": {"SVC_JWT_ISSUER_URL", oidc.Issuer()},
		"api_keys.file":  {"SVC_API_KEYS_FILE", keysFile},
		// Nothing is asked at the start: any loopback endpoint will do.
		"introspection.url": {"SVC_INTROSPECTION_URL", "http://127.0.0.1:1/introspect"},
		// Discovery waits for the first sign-in.
		"sdk.oidc": {"SVC_OIDC_ISSUER_URL", "http://127.0.0.1:1"},
	}
	// What a source needs besides its own variable to start.
	secretFile := filepath.Join(t.TempDir(), "introspection-secret")
	testkit.WriteFile(t, secretFile, []byte("s3cret\n"))
	sourceNeeds := map[string]map[string]string{
		"introspection.url": {"SVC_INTROSPECTION_CLIENT_ID": "svc", "SVC_INTROSPECTION_CLIENT_SECRET_FILE": secretFile},
		"sdk.oidc":          {"SVC_OIDC_CLIENT_ID": "svc", "SVC_OIDC_REDIRECT_URL": "http://127.0.0.1:7701/auth/oidc/callback"},
	}
	// [[jwt.issuers]] is a list of tables, which no variable sets: it is
	// set in the configuration file.
	sourceFile := map[string]string{
		"jwt.issuers": "[[jwt.issuers]]\nissuer = \"https://partner.example.test\"\njwks_url = \"" + jwks.URL + "\"\n",
		// Maps: no variable either.
		"client_certs.trust_domains": "[client_certs.trust_domains]\n\"acme.example\" = \"acme\"\n",
	}
	envOf := map[string]string{}
	for _, v := range config.EnvVars() {
		envOf[v.Key] = v.Name
	}
	local := func() map[string]string {
		samlAddr := harness.FreeAddr(t)
		env := samlOnlyDeployment(t, idp, samlAddr, samlAddr, "")
		env["SVC_ENV"] = "development"
		env["SVC_SIDECAR_ADDR"], env["SVC_HTTP_ADDR"] = harness.FreeAddr(t), harness.FreeAddr(t)
		return env
	}
	for _, key := range listeners {
		t.Run(key+" on every interface", func(t *testing.T) {
			env := local()
			name := envOf[key]
			env[name] = public(t, env[name])
			wantRefusal(t, failedStart(t, env), "svc-sidecar: ", "SVC_ENV", "unset SVC_ENV", key+" ("+name+") \"0.0.0.0:", "is not a loopback address")
		})
	}
	for _, key := range sources {
		set, byEnv := sourceEnv[key]
		file, byFile := sourceFile[key]
		if !byEnv && !byFile {
			t.Fatalf("identity source %s: the test does not know how to set it", key)
		}
		for _, withSAML := range []bool{true, false} {
			t.Run(key+" set, [sdk.saml] "+map[bool]string{true: "too", false: "absent"}[withSAML], func(t *testing.T) {
				env := local()
				if !withSAML {
					env = map[string]string{"SVC_ENV": "development"}
				}
				opts := harness.SidecarOptions{Env: env}
				named := key + " (" + set[0] + ") is set"
				if byFile {
					opts.Config, named = file, key+" ("
				} else {
					env[set[0]] = set[1]
				}
				for k, v := range sourceNeeds[key] {
					env[k] = v
				}
				wantRefusal(t, failedStartWith(t, opts), "svc-sidecar: ", "SVC_ENV", "unset SVC_ENV", named, ") is set")
				// Without the variable the same configuration starts.
				delete(env, "SVC_ENV")
				harness.StartSidecar(t, opts)
			})
		}
	}

	env := local()
	env["SVC_FAIL_MODE"] = "closed"
	sc := harness.StartSidecar(t, harness.SidecarOptions{Env: env})
	if st := getStatus(t, sc); st.Status != "degraded" || st.Reason != "saml-signature-check-disabled" {
		t.Errorf("local trial with SVC_ENV=development: status %+v, want degraded, saml-signature-check-disabled", st)
	}
}

// paragraphAfter is the indented text that follows the line head in s, up
// to the next line indented as head is.
func paragraphAfter(t *testing.T, s, head string) string {
	t.Helper()
	_, rest, ok := strings.Cut(s, head)
	if !ok {
		t.Fatalf("no %q in:\n%s", strings.TrimSpace(head), s)
	}
	var b strings.Builder
	for line := range strings.Lines(rest) {
		if !strings.HasPrefix(line, "    ") {
			break
		}
		b.WriteString(strings.TrimSpace(line) + " ")
	}
	return b.String()
}
