package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/samltest"
	"github.com/svc-dev/svc/samlgw"
)

// The local round trip of docs/saml.md: the test IdP's metadata configures
// the SP, test-assertion signs a response, the ACS accepts it and issues a
// token with the user's claims.
func TestSAMLTestAssertionRoundTrip(t *testing.T) {
	tmp := t.TempDir()
	idpDir := filepath.Join(tmp, "idp")
	r := run(t, tmp, "saml", "test-assertion", "--idp-dir", idpDir, "--metadata", "--out", "$TMP/idp.xml")
	if r.code != 0 || !strings.Contains(r.stderr, "created a test IdP key pair in "+idpDir) {
		t.Fatalf("--metadata: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	cfgPath := filepath.Join(tmp, "svc.toml")
	testkit.WriteFile(t, cfgPath, []byte(samltest.LocalSPConfig(filepath.Join(tmp, "idp.xml"))))
	// --output <file> is taken as the artifact path on this command.
	r = run(t, tmp, "--config", cfgPath, "saml", "test-assertion", "--idp-dir", idpDir,
		"--email", "dana@example.com", "--role", "admin", "--role", "billing", "--tenant", "acme", "--output", "$TMP/resp.b64")
	if r.code != 0 {
		t.Fatalf("test-assertion: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	resp, err := os.ReadFile(filepath.Join(tmp, "resp.b64"))
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := config.Load(cfgPath, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	is, err := issuer.New(issuer.Options{Issuer: cfg.SDK.SAML.EntityID, TTL: cfg.SDK.SAML.TokenTTL.Duration})
	if err != nil {
		t.Fatal(err)
	}
	// The gateway is told where it is served (loopback), which lets the
	// configuration's allow_idp_initiated do without Redis.
	srv := httptest.NewUnstartedServer(nil)
	gw, err := samlgw.New(cfg, samlgw.Deps{Issuer: is, Logger: slog.New(slog.DiscardHandler), Getenv: func(string) string { return "" },
		ListenAddr: srv.Listener.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	srv.Config.Handler = gw.Handler()
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/auth/saml/acs",
		strings.NewReader(url.Values{"SAMLResponse": {strings.TrimSpace(string(resp))}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	res, body := testkit.Do(t, nil, req)
	var ans struct {
		Token     string `json:"token"`
		TokenType string `json:"token_type"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.Token == "" || ans.TokenType != "Bearer" {
		t.Fatalf("ACS answered %d %s", res.StatusCode, body)
	}

	// Without --metadata, --email and --tenant are required: exit 2.
	if r := run(t, tmp, "--config", cfgPath, "saml", "test-assertion", "--idp-dir", idpDir); r.code != 2 {
		t.Errorf("no --email: exit %d, want 2", r.code)
	}
}

// TestSAMLTestAssertionWithoutConfig: without [sdk.saml], --entity-id and
// --acs-url, test-assertion says which flags would do and exits 2, and
// the default key pair directory is neither created nor left behind; it
// is the user's configuration directory, resolved when the command runs.
func TestSAMLTestAssertionWithoutConfig(t *testing.T) {
	tmp := t.TempDir()
	t.Chdir(tmp)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
	for _, v := range []string{"SVC_SAML_ENTITY_ID", "SVC_SAML_ACS_URL", "SVC_SAML_IDP_METADATA_URL", "SVC_SAML_IDP_METADATA_FILE"} {
		t.Setenv(v, "")
	}
	r := run(t, tmp, "saml", "test-assertion", "--email", "alice@example.com", "--tenant", "acme")
	if r.code != 2 || !strings.Contains(r.stderr, "--entity-id and --acs-url") {
		t.Errorf("without [sdk.saml]: exit %d, stderr %q; want 2 naming --entity-id and --acs-url", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(tmp, "config")); !os.IsNotExist(err) {
		t.Errorf("a refused test-assertion left the configuration directory behind (%v)", err)
	}
	r = run(t, tmp, "saml", "test-assertion", "--email", "alice@example.com", "--tenant", "acme",
		"--entity-id", "https://app.example.com/saml", "--acs-url", "https://app.example.com/auth/saml/acs", "--out", "$TMP/resp.b64")
	if r.code != 0 {
		t.Fatalf("with --entity-id and --acs-url: exit %d, stderr %q", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(tmp, "config", "svc", "saml-test-idp")); err != nil {
		t.Errorf("the key pair is not in $XDG_CONFIG_HOME/svc/saml-test-idp: %v", err)
	}
}

func TestSAMLMetadataCommand(t *testing.T) {
	tmp := t.TempDir()
	cfgPath := filepath.Join(tmp, "svc.toml")
	toml := `[sdk.saml]
entity_id = "https://app.example.com/auth/saml/metadata"
acs_url = "https://app.example.com/auth/saml/acs"
idp_metadata_url = "https://idp.example.com/metadata"
`
	testkit.WriteFile(t, cfgPath, []byte(toml))
	r := run(t, tmp, "--config", cfgPath, "saml", "metadata")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{`entityID="https://app.example.com/auth/saml/metadata"`,
		`Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="https://app.example.com/auth/saml/acs"`,
		"urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("metadata lacks %s:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "HTTP-Artifact") {
		t.Error("metadata offers the artifact binding, which the ACS does not serve")
	}
	if r := run(t, tmp, "--config", cfgPath, "saml", "metadata", "--out", "$TMP/md.xml"); r.code != 0 {
		t.Fatalf("--out: exit %d %s", r.code, r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(tmp, "md.xml")); err != nil || !strings.Contains(string(b), "EntityDescriptor") {
		t.Errorf("md.xml: %v %s", err, b)
	}
	noSAML := filepath.Join(tmp, "plain.toml")
	testkit.WriteFile(t, noSAML, []byte("[sdk]\ntenant_id = \"a\"\n"))
	if r := run(t, tmp, "--config", noSAML, "saml", "metadata"); r.code != 2 || !strings.Contains(r.stderr, "[sdk.saml]") {
		t.Errorf("no [sdk.saml]: exit %d %s, want 2 naming the table", r.code, r.stderr)
	}
}
