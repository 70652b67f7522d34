package engine_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/apikey"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// apiKeyEngine is an engine whose only identity source is a key file
// holding an admin key and a viewer key of tenant acme.
func apiKeyEngine(t testing.TB, deps engine.Deps) (e *engine.Engine, path, admin, viewer string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "api-keys.toml")
	_, admin, err := apikey.Append(path, apikey.NewEntry{Tenant: "acme", Subject: "ci-deployer", Roles: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	_, viewer, err = apikey.Append(path, apikey.NewEntry{Tenant: "acme", Subject: "reporting", Roles: []string{"viewer"}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := prodConfig("")
	cfg.APIKeys.File = path
	cfg.RateLimit.DefaultRPM = 1 << 40 // counted, never refused
	return newEngine(t, cfg, deps), path, admin, viewer
}

// credentialCase is a credential presented for action on an order, and
// the decision it must get.
type credentialCase struct {
	name    string
	cred    engine.Credential
	action  string
	allowed bool
	code    reason.Code
}

// checkCredentialDecisions asks e for each case's decision.
func checkCredentialDecisions(t *testing.T, e *engine.Engine, tests []credentialCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.Decide(t.Context(), engine.Request{Credential: tt.cred, Input: engine.Input{Action: tt.action, Resource: policy.Resource{Type: "orders"}}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed() != tt.allowed || res.Decision.Reason != tt.code {
				t.Fatalf("Decide = allowed %v, reason %s (%s); want %v, %s", res.Allowed(), res.Decision.Reason, res.Token.Message, tt.allowed, tt.code)
			}
		})
	}
}

func TestAPIKeyDecisions(t *testing.T) {
	e, _, admin, viewer := apiKeyEngine(t, engine.Deps{})
	if e.DevMode() {
		t.Fatal("api_keys.file set, yet development mode")
	}
	ctx := context.Background()
	wrong := testkit.WrongSecret(admin)
	tests := []credentialCase{
		{"admin deletes", engine.APIKey(admin), "orders:delete", true, reason.PolicyAllow},
		{"viewer reads", engine.APIKey(viewer), "orders:read", true, reason.PolicyAllow},
		{"viewer deletes", engine.APIKey(viewer), "orders:delete", false, reason.PolicyDeny},
		{"wrong secret", engine.APIKey(wrong), "orders:read", false, reason.APIKeyUnknown},
		{"malformed", engine.APIKey("svck_nope"), "orders:read", false, reason.APIKeyMalformed},
		{"from the token field", engine.CredentialOf(viewer), "orders:read", true, reason.PolicyAllow},
		{"a bearer token with no verifier", engine.BearerToken("eyJhbGciOiJFUzI1NiJ9.e30.c2ln"), "orders:read", false, reason.IssuerUnknown},
	}
	checkCredentialDecisions(t, e, tests)
	res, _ := e.Decide(ctx, engine.Request{Scope: engine.ScopeToken, Credential: engine.APIKey(admin)})
	if d := res.Token; !d.Allowed || d.Subject != "ci-deployer" || d.TenantID != "acme" || d.Claims["sub"] != "ci-deployer" {
		t.Fatalf("ValidateToken with an API key = %+v", d)
	}
	res, _ = e.Decide(ctx, engine.Request{Credential: engine.APIKey(admin), Input: engine.Input{Action: "orders:read"}})
	if u := res.Input.User; u.ID != "ci-deployer" || u.TenantID != "acme" || u.Role != "admin" || len(u.Roles) != 1 || u.Claims["api_key_id"] == nil {
		t.Fatalf("input.user = %+v, want the key's identity", u)
	}
	if id := res.Input.Identity; id == nil || id.Kind != engine.KindAPIKey || id.ID != "ci-deployer" || id.TenantID != "acme" ||
		len(id.Roles) != 1 || id.Roles[0] != "admin" || id.Issuer != "" || res.Token.Kind != engine.KindAPIKey {
		t.Fatalf("input.identity = %+v, token kind %q; want the key's identity of kind api_key", id, res.Token.Kind)
	}
}

// A revoked key is refused once the file is re-read; a file with a
// plaintext key is refused and the keys before it stay in force.
func TestAPIKeyReload(t *testing.T) {
	e, path, admin, viewer := apiKeyEngine(t, engine.Deps{})
	ctx := context.Background()
	reasonOf := func(key string) reason.Code {
		res, _ := e.Decide(ctx, engine.Request{Scope: engine.ScopeToken, Credential: engine.APIKey(key)})
		return res.Token.Reason
	}
	id, _ := apikey.Split(admin)
	if _, err := apikey.Revoke(path, id); err != nil {
		t.Fatal(err)
	}
	if err := e.ReloadAPIKeys(ctx); err != nil {
		t.Fatal(err)
	}
	if got := reasonOf(admin); got != reason.APIKeyRevoked {
		t.Fatalf("revoked key: %s, want api-key-revoked", got)
	}

	good, _ := os.ReadFile(path)
	bad := append(append([]byte{}, good...), []byte("# "+viewer+"\n")...)
	testkit.WriteFile(t, path, bad)
	// The watch notices the change on its own.
	testkit.Eventually(t, "the refusal of the plaintext key file", func() bool {
		st := e.Status().APIKeys
		return st != nil && st.Refusals == 1
	})
	st := e.Status().APIKeys
	if !strings.Contains(st.LastError, "plaintext") || st.Keys != 2 || strings.Contains(st.LastError, viewer) {
		t.Fatalf("status = %+v, want the refusal (without the key) and 2 keys in force", st)
	}
	if got := reasonOf(viewer); got != reason.OK {
		t.Fatalf("viewer key after a refused file: %s, want ok", got)
	}
}

func TestAPIKeyFileRefusesStart(t *testing.T) {
	path := testkit.TempFile(t, "api-keys.toml", []byte("[[keys]]\nid = \"aeaqcaibaeaq\"\nkey = \"x\"\n"))
	cfg := prodConfig("")
	cfg.APIKeys.File = path
	for name, err := range map[string]error{"New": func() error { _, err := engine.New(cfg, engine.Deps{}); return err }(), "Check": engine.Check(cfg)} {
		if err == nil || !strings.Contains(err.Error(), "api_keys.file") || !strings.Contains(err.Error(), "line 3") {
			t.Errorf("%s with a bad key file = %v, want a refusal naming api_keys.file and line 3", name, err)
		}
	}
	cfg.APIKeys.File = filepath.Join(t.TempDir(), "missing.toml")
	if _, err := engine.New(cfg, engine.Deps{}); err == nil {
		t.Error("New with a missing key file: no error")
	}
}

// BenchmarkAuthorizeAPIKey measures a whole decision on an API key: the
// key's lookup and hash, its identity, rate limit, default policy; set
// against BenchmarkAuthorize's cached token.
func BenchmarkAuthorizeAPIKey(b *testing.B) {
	e, _, _, viewer := apiKeyEngine(b, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx := context.Background()
	req := engine.Request{Credential: engine.APIKey(viewer), Input: engine.Input{Action: "orders:read"}}
	if res, err := e.Decide(ctx, req); err != nil || !res.Allowed() {
		b.Fatalf("warm-up decision: %+v %v", res.Decision, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Decide(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
