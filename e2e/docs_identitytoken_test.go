package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

// The "Try it" block of docs/identity-token.md works as written, with the
// binaries the harness built; only the default ports are swapped for
// free ones.
func TestDocsIdentityTokenTryIt(t *testing.T) {
	d := newDocRun(t, []string{"jq", "openssl"}, "svc-sidecar", "core")
	grpcAddr, httpAddr := harness.FreeAddr(t), harness.FreeAddr(t)
	script := strings.NewReplacer("127.0.0.1:7700", httpAddr).Replace(docsBlock(t, "identity-token.md", "## Try it"))
	out := d.run("the docs/identity-token.md block", "-euo pipefail",
		d.pathEnv("SVC_SIDECAR_ADDR="+grpcAddr, "SVC_HTTP_ADDR="+httpAddr), script)
	// jq's object, then the key set on one line.
	claimsText, jwksText, ok := strings.Cut(strings.TrimSpace(out), "\n}\n")
	if !ok {
		t.Fatalf("want the claims and the key set:\n%s", out)
	}
	var claims map[string]any
	if err := json.Unmarshal([]byte(claimsText+"}"), &claims); err != nil {
		t.Fatalf("claims: %v\n%s", err, out)
	}
	for k, want := range map[string]any{"iss": "svc-sidecar", "sub": "reporting", "aud": "orders.internal",
		"tenant_id": "acme", "kind": "api_key"} {
		if claims[k] != want {
			t.Errorf("claim %s = %v, want %v", k, claims[k], want)
		}
	}
	if claims["decision_id"] == "" || claims["exp"] == nil {
		t.Errorf("claims lack decision_id or exp: %v", claims)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal([]byte(jwksText), &set); err != nil || len(set.Keys) != 1 || set.Keys[0]["alg"] != "ES256" {
		t.Errorf("key set %s: %v", jwksText, err)
	}
}
