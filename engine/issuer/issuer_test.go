package issuer_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/internal/testkit"
)

// Rotation: the new key first signs; tokens of the old key, kept second in
// the file, still verify; the JWKS publishes both.
func TestRotation(t *testing.T) {
	oldKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	newKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	const iss = "https://app.example.com/sp"
	before, err := issuer.New(issuer.Options{KeyFile: testkit.TempFile(t, "keys.pem", testkit.PrivateKeyPEM(t, oldKey)), Issuer: iss, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	oldTok, _, err := before.Issue(map[string]any{"sub": "a", "tenant_id": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	after, err := issuer.New(issuer.Options{KeyFile: testkit.TempFile(t, "keys.pem", append(testkit.PrivateKeyPEM(t, newKey), testkit.PrivateKeyPEM(t, oldKey)...)), Issuer: iss, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if after.KeyID() == before.KeyID() {
		t.Fatal("the first key of the file does not sign")
	}
	v, err := token.New(token.Options{Keys: after, Issuer: iss, Audiences: []string{iss}})
	if err != nil {
		t.Fatal(err)
	}
	newTok, _, err := after.Issue(map[string]any{"sub": "b", "tenant_id": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"old": oldTok, "new": newTok} {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Errorf("%s token: %v", name, err)
		}
	}
	raw, err := after.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) != 2 {
		t.Fatalf("JWKS %s", raw)
	}
	for _, k := range set.Keys {
		if _, private := k["d"]; private || k["alg"] != "ES256" || k["kid"] == "" {
			t.Errorf("JWKS key %v: want public ES256 with kid", k)
		}
	}
}

func TestBadKeyFiles(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, content := range map[string][]byte{
		"empty": nil, "rsa": testkit.PrivateKeyPEM(t, rsaKey), "p384": testkit.PrivateKeyPEM(t, p384), "garbage": []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
	} {
		if _, err := issuer.New(issuer.Options{KeyFile: testkit.TempFile(t, "keys.pem", content), Issuer: "x", TTL: time.Minute}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
