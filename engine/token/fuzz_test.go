package token_test

import (
	"context"
	"testing"

	"github.com/svc-dev/svc/reason"
)

// tokenCodes are the reasons Verify may give.
var tokenCodes = map[reason.Code]bool{
	reason.TokenMissing: true, reason.TokenMalformed: true, reason.TokenExpired: true,
	reason.TokenNotYetValid: true, reason.TokenIssuedInFuture: true, reason.SignatureInvalid: true,
	reason.UnknownKID: true, reason.AlgNotAllowed: true, reason.KeyTooWeak: true,
	reason.TenantMissing: true, reason.IssuerMismatch: true, reason.AudienceMismatch: true,
	reason.JWKSUnavailable: true,
}

// FuzzVerify feeds arbitrary strings to Verify against the committed JWKS,
// seeded with the committed tokens (valid ones included, so mutations
// reach the claim checks). Verify must never panic, every error must be a
// *reason.Error with a token code, and accepted claims must hold exp and
// the tenant.
func FuzzVerify(f *testing.F) {
	for _, tok := range testdataTokenFiles(f) {
		f.Add(tok)
	}
	f.Add("")
	f.Add("..")
	f.Add("e30.e30.")
	v := testdataVerifier(f)
	f.Fuzz(func(t *testing.T, tok string) {
		claims, err := v.Verify(context.Background(), tok)
		if err != nil {
			re, ok := err.(*reason.Error)
			if !ok || !tokenCodes[re.Code] {
				t.Fatalf("error %T %v carries no token reason code", err, err)
			}
			if claims != nil {
				t.Fatal("claims returned with an error")
			}
			return
		}
		if claims == nil || claims.String("tenant_id") == "" || claims["exp"] == nil {
			t.Fatalf("accepted claims lack exp or tenant: %v", claims)
		}
	})
}
