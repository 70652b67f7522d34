package jwks

import (
	"crypto"
	"encoding/base64"
	"fmt"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// LocalKey is the verification Key of a public key svc holds itself (the
// SAML gateway's token keys, the development issuer's): its kid is its
// RFC 7638 SHA-256 thumbprint, base64url, and it verifies alg only.
func LocalKey(pub crypto.PublicKey, alg jwa.SignatureAlgorithm) (Key, error) {
	jk, err := jwk.Import(pub)
	if err != nil {
		return Key{}, fmt.Errorf("import key: %w", err)
	}
	tp, err := jk.Thumbprint(crypto.SHA256)
	if err != nil {
		return Key{}, fmt.Errorf("key thumbprint: %w", err)
	}
	kid := base64.RawURLEncoding.EncodeToString(tp)
	for _, set := range []func() error{
		func() error { return jk.Set(jwk.KeyIDKey, kid) },
		func() error { return jk.Set(jwk.AlgorithmKey, alg) },
		func() error { return jk.Set(jwk.KeyUsageKey, "sig") },
	} {
		if err := set(); err != nil {
			return Key{}, fmt.Errorf("key attributes: %w", err)
		}
	}
	k := Key{ID: kid, JWK: jk, Public: pub, Algs: []jwa.SignatureAlgorithm{alg}}
	copy(k.Thumbprint[:], tp)
	return k, nil
}
