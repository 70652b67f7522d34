package harness

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// IDPClient is a client registered at the OpenID provider. Its tokens
// carry sub = ID and the custom claims tenant_id, roles and email.
type IDPClient struct {
	ID       string   `json:"client_id"`
	Secret   string   `json:"client_secret"`
	TenantID string   `json:"tenant_id,omitempty"`
	Roles    []string `json:"roles,omitempty"`
	Email    string   `json:"email,omitempty"`
	// Opaque makes the client's access tokens opaque: only the
	// provider's introspection endpoint can read them.
	Opaque bool `json:"opaque,omitempty"`
	// RedirectURIs make the client one of browser sign-in (authorization
	// code with PKCE) instead: its sign-ins complete at once, as the
	// account named like the client, with the claims above.
	RedirectURIs []string `json:"redirect_uris,omitempty"`
	// BackchannelLogoutURI receives the provider's logout tokens.
	BackchannelLogoutURI string `json:"backchannel_logout_uri,omitempty"`
}

// IDP is a running OpenID provider (npm oidc-provider, e2e/idp/server.mjs)
// issuing RS256 JWT access tokens through the client_credentials grant.
type IDP struct {
	*Process
	// Issuer is the provider's issuer URL (the iss of its tokens).
	Issuer string `json:"issuer"`
	// TokenURL is the token endpoint.
	TokenURL string `json:"token_endpoint"`
	// JWKSURL is the provider's JWKS endpoint.
	JWKSURL string `json:"jwks_uri"`
	// IntrospectionURL is the provider's RFC 7662 introspection
	// endpoint, which any client authenticating with
	// client_secret_basic may call.
	IntrospectionURL string `json:"introspection_endpoint"`
	// Kid is the kid of the current signing key.
	Kid string `json:"kid"`
	// Resource is the resource indicator requested for tokens; it is
	// their aud.
	Resource string `json:"-"`

	clients map[string]IDPClient
}

// StartIDP runs the OpenID provider with the given clients, issuing tokens
// for resource that live ttl. It needs node and e2e/node_modules (installed
// by scripts/install-test-deps.sh).
func StartIDP(t testing.TB, resource string, ttl time.Duration, clients ...IDPClient) *IDP {
	t.Helper()
	cfg, err := json.Marshal(map[string]any{
		"resource": resource,
		"ttl":      int(ttl / time.Second),
		"clients":  clients,
	})
	if err != nil {
		t.Fatalf("idp config: %v", err)
	}
	return startIDP(t, map[string]string{"IDP_CONFIG": string(cfg)}, resource, clients)
}

// StartIDPConfigFile runs the OpenID provider on a configuration file of
// its own format (see e2e/idp/server.mjs), such as the demo's. addr, when
// set, replaces the file's host and port.
func StartIDPConfigFile(t testing.TB, path, addr string) *IDP {
	t.Helper()
	if addr == "" {
		return StartIDPConfigFileWith(t, path, nil)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return StartIDPConfigFileWith(t, path, func(cfg map[string]any) {
		cfg["host"] = host
		cfg["port"], _ = strconv.Atoi(port)
	})
}

// StartIDPConfigFileWith runs the OpenID provider on a configuration
// file of its own format, first changed by edit (when not nil), which
// sees the file's JSON object; its users_file stays the file's.
func StartIDPConfigFileWith(t testing.TB, path string, edit func(cfg map[string]any)) *IDP {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// The copy is elsewhere: a people file relative to the original
		// is named in full.
		if users, ok := cfg["users_file"].(string); ok && !filepath.IsAbs(users) {
			cfg["users_file"] = filepath.Join(filepath.Dir(path), users)
		}
		edit(cfg)
		if raw, err = json.Marshal(cfg); err != nil {
			t.Fatal(err)
		}
		path = WriteFile(t, t.TempDir(), "idp.json", string(raw))
	}
	var parts struct {
		Resource string      `json:"resource"`
		Clients  []IDPClient `json:"clients"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return startIDP(t, map[string]string{"IDP_CONFIG_FILE": path}, parts.Resource, parts.Clients)
}

func startIDP(t testing.TB, env map[string]string, resource string, clients []IDPClient) *IDP {
	t.Helper()
	node := LookPath(t, "node", "nodejs")
	e2e := filepath.Join(ModuleRoot(t), "e2e")
	if _, err := os.Stat(filepath.Join(e2e, "node_modules", "oidc-provider", "package.json")); err != nil {
		Missing(t, "npm package oidc-provider", "run scripts/install-test-deps.sh, or npm ci in e2e/")
	}
	env["NODE_ENV"] = "test"
	cmd := exec.Command(node, filepath.Join(e2e, "idp", "server.mjs"))
	cmd.Dir = e2e
	cmd.Env = envList(baseEnv(), env)
	p := &IDP{Process: StartProcess(t, "oidc-provider", cmd), Resource: resource, clients: map[string]IDPClient{}}
	for _, c := range clients {
		p.clients[c.ID] = c
	}
	out, err := p.WaitOutput(t, false, 30*time.Second, func(s string) bool { return strings.Contains(s, "\n") })
	if err != nil {
		t.Fatalf("oidc-provider did not start: %v", err)
	}
	line, _, _ := strings.Cut(out, "\n")
	if err := json.Unmarshal([]byte(line), p); err != nil {
		t.Fatalf("oidc-provider start line %q: %v", line, err)
	}
	return p
}

// GrantCount is how many token requests of one grant type the provider
// answered, and how many it refused.
type GrantCount struct {
	Success int `json:"success"`
	Error   int `json:"error"`
}

// Grants returns the provider's token requests so far by grant type
// ("authorization_code", "refresh_token", ...).
func (p *IDP) Grants(t testing.TB) map[string]GrantCount {
	t.Helper()
	resp, err := http.Get(p.Issuer + "/_admin/grants")
	if err != nil {
		t.Fatalf("grants: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]GrantCount{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("grants: %v", err)
	}
	return out
}

// Token gets an access token for the client from the token endpoint with
// the client_credentials grant and the provider's resource indicator.
func (p *IDP) Token(t testing.TB, clientID string) string {
	t.Helper()
	c, ok := p.clients[clientID]
	if !ok {
		t.Fatalf("idp: unknown client %q", clientID)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {p.Resource}}
	req, err := http.NewRequest(http.MethodPost, p.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(c.ID), url.QueryEscape(c.Secret))
	status, h, body := Do(t, req)
	if status != http.StatusOK {
		t.Fatalf("token endpoint: %s", Describe(status, h, body))
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if err := json.Unmarshal(body, &tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("token endpoint answered no access token: %v", err)
	}
	return tok.AccessToken
}

// Rotate makes the provider sign with a new key from now on and returns
// its kid. The previous keys stay in the JWKS unless retire is set.
func (p *IDP) Rotate(t testing.TB, retire bool) string {
	t.Helper()
	u := strings.TrimSuffix(p.Issuer, "/") + "/_admin/rotate"
	if retire {
		u += "?retire=1"
	}
	req, err := http.NewRequest(http.MethodPost, u, nil)
	if err != nil {
		t.Fatalf("rotate: %v", err)
	}
	status, h, body := Do(t, req)
	if status != http.StatusOK {
		t.Fatalf("rotate: %s", Describe(status, h, body))
	}
	var r struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Kid == "" {
		t.Fatalf("rotate answered no kid: %v", err)
	}
	p.Kid = r.Kid
	return r.Kid
}
