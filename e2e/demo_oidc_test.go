package e2e

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/svc-dev/svc/internal/harness"
)

// TestDemoOIDCProviderSignIn signs in at the demo's OpenID provider as its
// sign-in client (deploy/demo/idp.json, svc-demo-web) would, without the
// sidecar: the authorization request with PKCE shows the "Sign in as"
// page of the demo's users, an unknown user is refused, and the one
// picked comes back with a code whose ID token carries that user's email
// as sub, tenant_id and roles. The provider keeps no sign-in: the next
// request asks again.
func TestDemoOIDCProviderSignIn(t *testing.T) {
	root := harness.ModuleRoot(t)
	front := harness.FreeAddr(t)
	idp := startDemoIDP(t, filepath.Join(root, "deploy", "demo", "idp.json"), front)
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "demo", "oidc-client-secret"))
	if err != nil {
		t.Fatal(err)
	}
	secret := strings.TrimSpace(string(raw))
	conf := &oauth2.Config{
		ClientID: "svc-demo-web", ClientSecret: secret,
		Endpoint:    oauth2.Endpoint{AuthURL: idp.Issuer + "/auth", TokenURL: idp.Issuer + "/token", AuthStyle: oauth2.AuthStyleInHeader},
		RedirectURL: "http://" + front + "/auth/oidc/callback",
		Scopes:      []string{oidc.ScopeOpenID, "email"},
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	// The browser: it follows the provider's redirects but stops at the
	// callback, where nothing listens.
	b := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if r.URL.Host == front {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	form := regexp.MustCompile(`<form method="post" action="(/interaction/[^"]+)">`)
	// signInPage starts a sign-in and returns the page's form action.
	signInPage := func(verifier string) string {
		t.Helper()
		resp, body := getBody(t, b, conf.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifier), oidc.Nonce("nonce-1")), "Accept", browserAccept)
		m := form.FindStringSubmatch(body)
		if resp.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("authorization request: %s, want the sign-in page", harness.Describe(resp.StatusCode, resp.Header, []byte(body)))
		}
		for _, user := range []string{"dana", "bill", "olga"} {
			if !strings.Contains(body, `name="user" value="`+user+`"`) {
				t.Errorf("the sign-in page does not offer %s: %s", user, body)
			}
		}
		return idp.Issuer + m[1]
	}
	verifier := oauth2.GenerateVerifier()
	action := signInPage(verifier)
	resp, err := b.PostForm(action, url.Values{"user": {"mallory"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := readBody(resp)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("an unknown user: %s, want 400", harness.Describe(resp.StatusCode, resp.Header, []byte(body)))
	}
	resp, err = b.PostForm(action, url.Values{"user": {"dana"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode/100 != 3 || cb == nil || cb.Host != front || cb.Query().Get("state") != "state-1" || cb.Query().Get("code") == "" {
		t.Fatalf("sign-in as dana: %d Location %q, want the callback with a code", resp.StatusCode, resp.Header.Get("Location"))
	}

	ctx := oidc.ClientContext(t.Context(), &http.Client{Timeout: 10 * time.Second})
	tok, err := conf.Exchange(ctx, cb.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("code exchange: %v", err)
	}
	op, err := oidc.NewProvider(ctx, idp.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	rawID, _ := tok.Extra("id_token").(string)
	idt, err := op.Verifier(&oidc.Config{ClientID: conf.ClientID}).Verify(ctx, rawID)
	if err != nil {
		t.Fatalf("ID token: %v", err)
	}
	var claims struct {
		Email    string   `json:"email"`
		TenantID string   `json:"tenant_id"`
		Roles    []string `json:"roles"`
		Nonce    string   `json:"nonce"`
	}
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	if idt.Subject != "dana@demo.example" || claims.Email != "dana@demo.example" || claims.TenantID != "demo" ||
		!slices.Equal(claims.Roles, []string{"viewer"}) || claims.Nonce != "nonce-1" {
		t.Errorf("ID token sub %q claims %+v, want dana@demo.example of tenant demo, viewer, nonce-1", idt.Subject, claims)
	}

	// No sign-in session is kept: the next sign-in asks again.
	signInPage(oauth2.GenerateVerifier())
}
