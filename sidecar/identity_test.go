package sidecar

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/envoy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// identityCheck returns the x-svc-identity token of an allowed Check.
func identityCheck(t *testing.T, r *running, token string) string {
	t.Helper()
	resp, err := authv3.NewAuthorizationClient(dial(t, r.GRPCAddr())).Check(context.Background(), checkRequest(token, http.MethodGet, "/orders/1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range resp.GetOkResponse().GetHeaders() {
		if h.GetHeader().GetKey() == envoy.HeaderIdentity {
			return h.GetHeader().GetValue()
		}
	}
	t.Fatalf("no %s in %v", envoy.HeaderIdentity, resp)
	return ""
}

// verifyAtJWKS verifies tok against the sidecar's published keys.
func verifyAtJWKS(t *testing.T, r *running, tok string) error {
	t.Helper()
	code, body := get(t, r, PathIdentityJWKS)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", PathIdentityJWKS, code, body)
	}
	_, err := testkit.VerifyJWT(body, tok)
	return err
}

// TestIdentityJWKS: the keys are published, open, at
// /.well-known/jwks.json; a reload (SIGHUP) with a new key file signs with
// the new key and keeps the old one published; the status shows both.
func TestIdentityJWKS(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	keyFile := testkit.TokenKeyFile(t)
	cfg.IdentityToken.SigningKeyFile = keyFile
	cfg.SetDefaults()
	r := startSidecar(t, cfg)
	token := idp.token(t, "alice", testTenant, "viewer")

	old := identityCheck(t, r, token)
	if err := verifyAtJWKS(t, r, old); err != nil {
		t.Fatalf("identity token does not verify: %v", err)
	}

	next, err := os.ReadFile(testkit.TokenKeyFile(t))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, keyFile, next)
	if err := r.ReloadPolicies(context.Background()); err != nil {
		t.Fatal(err)
	}
	fresh := identityCheck(t, r, token)
	if fresh == old {
		t.Fatal("the token of the replaced key is still handed out")
	}
	for _, tok := range []string{old, fresh} {
		if err := verifyAtJWKS(t, r, tok); err != nil {
			t.Errorf("after rotation: %v", err)
		}
	}
	st := getStatus(t, r)
	if it := st.IdentityToken; it == nil || it.Published != 2 || it.Minted != 2 {
		b, _ := json.Marshal(st.IdentityToken)
		t.Errorf("status identity_token = %s, want 2 keys published, 2 minted", b)
	}
}

func TestIdentityJWKSOff(t *testing.T) {
	idp := newTestIdP(t)
	r := startSidecar(t, testConfig(idp))
	if code, body := get(t, r, PathIdentityJWKS); code != http.StatusNotFound || errorCode(body) != string(reason.NotFound) {
		t.Errorf("GET %s without identity_token = %d %s, want 404 not-found", PathIdentityJWKS, code, body)
	}
}
