package issuer

import (
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"os"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/svc-dev/svc/engine/jwks"
)

// Keys are the keys of a signing key file (see ParseKeys): the first,
// private, signs; every key of the file verifies. Both the SAML
// gateway's session tokens and the identity tokens handed to upstreams
// are signed from one.
type Keys struct {
	// Signer is the first key of the file.
	Signer *ecdsa.PrivateKey
	// KeyID is the Signer's kid, the RFC 7638 thumbprint of its public key.
	KeyID string
	// Verify are the public keys of the file in its order, duplicates
	// left out, the Signer's first.
	Verify []jwks.Key
}

// ReadKeys reads and parses a signing key file. Errors name the file,
// never its contents.
func ReadKeys(path string) (Keys, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Keys{}, fmt.Errorf("read signing key file: %w", err)
	}
	signer, pubs, err := ParseKeys(data)
	if err != nil {
		return Keys{}, fmt.Errorf("signing key file %s: %w", path, err)
	}
	return KeysOf(signer, pubs)
}

// KeysOf makes the Keys of a signer and the public keys that verify,
// signer's first (ParseKeys' results).
func KeysOf(signer *ecdsa.PrivateKey, pubs []*ecdsa.PublicKey) (Keys, error) {
	ks := Keys{Signer: signer}
	seen := map[string]bool{}
	for i, pub := range pubs {
		k, err := verificationKey(pub)
		if err != nil {
			return Keys{}, err
		}
		if seen[k.ID] {
			continue
		}
		if i == 0 {
			ks.KeyID = k.ID
		}
		seen[k.ID] = true
		ks.Verify = append(ks.Verify, k)
	}
	return ks, nil
}

func verificationKey(pub *ecdsa.PublicKey) (jwks.Key, error) {
	k, err := jwks.LocalKey(pub, jwa.ES256())
	if err != nil {
		return jwks.Key{}, fmt.Errorf("issuer: %w", err)
	}
	return k, nil
}

// Sign signs payload, a JSON claim set, as an ES256 JWT with kid in
// its header.
func Sign(key *ecdsa.PrivateKey, kid string, payload []byte) (string, error) {
	h := jws.NewHeaders()
	if err := h.Set(jws.KeyIDKey, kid); err != nil {
		return "", err
	}
	if err := h.Set(jws.TypeKey, "JWT"); err != nil {
		return "", err
	}
	tok, err := jws.Sign(payload, jws.WithKey(jwa.ES256(), key, jws.WithProtectedHeaders(h)))
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return string(tok), nil
}

// KeySet renders keys as a JSON Web Key Set document.
func KeySet(keys []jwks.Key) ([]byte, error) {
	set := jwk.NewSet()
	for _, k := range keys {
		if err := set.AddKey(k.JWK); err != nil {
			return nil, fmt.Errorf("jwks: %w", err)
		}
	}
	return json.Marshal(set)
}
