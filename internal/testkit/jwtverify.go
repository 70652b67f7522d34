package testkit

import (
	"fmt"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

// VerifyJWT verifies tok against the JSON Web Key Set document jwks, as
// a service verifying svc's tokens would (with jwx), and returns its
// claims; opts add checks (audience, clock). An error is a token that
// does not verify; a key set that does not parse is an error too.
func VerifyJWT(jwks []byte, tok string, opts ...jwt.ParseOption) (map[string]any, error) {
	set, err := jwk.Parse(jwks)
	if err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	parsed, err := jwt.ParseString(tok, append([]jwt.ParseOption{jwt.WithKeySet(set)}, opts...)...)
	if err != nil {
		return nil, err
	}
	claims := map[string]any{}
	for _, k := range parsed.Keys() {
		var v any
		if parsed.Get(k, &v) == nil {
			claims[k] = v
		}
	}
	return claims, nil
}
