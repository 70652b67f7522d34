package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/reason"
)

const samlEntityInternal = "https://app.example.com/auth/saml/metadata"

// samlEngine returns an engine with [sdk.saml] (signing key keyFile) next
// to p's JWKS, on clock now.
func samlEngine(t testing.TB, p *idptest.IdP, keyFile string, now func() time.Time) *Engine {
	t.Helper()
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	cfg.SDK.JWKSURL = p.JWKSURL()
	cfg.SDK.FailMode = config.FailClosed
	cfg.RateLimit.Disabled = true
	cfg.JWT.Issuer = "https://idp.example.com/"
	cfg.JWT.Audiences = []string{"orders"}
	cfg.JWT.CacheMaxAge = config.Duration{Duration: 10 * time.Minute}
	cfg.SDK.SAML = &config.SAML{
		EntityID: samlEntityInternal, ACSURL: "https://app.example.com/auth/saml/acs",
		IDPMetadataFile: "/unused/by/the/engine.xml", TokenSigningKeyFile: keyFile,
		TokenTTL: config.Duration{Duration: 15 * time.Minute},
	}
	e, err := New(cfg, Deps{Logger: slog.New(slog.DiscardHandler), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// verifyBefore is the engine's verify as it was before the token was
// hashed once for both verifiers: each VerifyDerived in turn, the JWKS
// verifier only on the local verifier's unknown kid.
func verifyBefore(e *Engine, ctx context.Context, raw string) (token.Claims, *policy.User, error) {
	if e.local != nil {
		claims, user, err := e.local.VerifyDerived(ctx, raw)
		var re *reason.Error
		if err == nil || e.jwksVerifier() == nil || !errors.As(err, &re) || re.Code != reason.UnknownKID {
			return claims, derivedUser(user), err
		}
	}
	claims, user, err := e.jwksVerifier().VerifyDerived(ctx, raw)
	return claims, derivedUser(user), err
}

// verifyNow is the engine's verification: its token chain, once.
func verifyNow(e *Engine, ctx context.Context, raw string) (token.Claims, *policy.User, error) {
	claims, user, err := e.tokens.VerifyDerived(ctx, raw)
	return claims, derivedUser(user), err
}

// withHeader returns tok with its header replaced by h: the signature no
// longer covers it.
func withHeader(t *testing.T, tok string, h map[string]any) string {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(tok, ".")
	return base64.RawURLEncoding.EncodeToString(b) + "." + rest
}

// withSignatureOf returns tok carrying other's signature.
func withSignatureOf(tok, other string) string {
	return tok[:strings.LastIndexByte(tok, '.')] + other[strings.LastIndexByte(other, '.'):]
}

// TestSAMLVerifyAsBefore: on an engine with [sdk.saml], its token chain answers
// every token as the two VerifyDerived in turn did (twin engines on one
// clock, the same keys), through cache hits, expiry, re-verification
// after the cache's max age, and leaves the same counts in the JWKS
// verifier's cache (reported as svc metrics).
func TestSAMLVerifyAsBefore(t *testing.T) {
	p := idptest.New(t)
	keyFile := testkit.TokenKeyFile(t)
	t0 := time.Now().Truncate(time.Second)
	var clock atomic.Int64
	clock.Store(t0.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	e := samlEngine(t, p, keyFile, now)
	ref := samlEngine(t, p, keyFile, now)
	ctx := context.Background()

	foreign, err := issuer.New(issuer.Options{Issuer: samlEntityInternal, TTL: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	idpClaims := func(over map[string]any) map[string]any {
		c := idptest.Override(idptest.Claims("bob", "acme", "viewer"), map[string]any{
			"iss": "https://idp.example.com/", "aud": "orders",
			"iat": now().Unix(), "exp": now().Add(30 * time.Minute).Unix(),
		})
		return idptest.Override(c, over)
	}
	// tokens returns tokens issued at the clock's time, of every kind.
	tokens := func() map[string]string {
		local, _, err := e.Issuer().Issue(map[string]any{"sub": "alice", "tenant_id": "acme", "roles": []string{"viewer"}})
		if err != nil {
			t.Fatal(err)
		}
		local2, _, err := e.Issuer().Issue(map[string]any{"sub": "carol", "tenant_id": "acme"})
		if err != nil {
			t.Fatal(err)
		}
		alien, _, err := foreign.Issue(map[string]any{"sub": "mallory", "tenant_id": "acme"})
		if err != nil {
			t.Fatal(err)
		}
		idp := p.Token(t, idpClaims(nil))
		return map[string]string{
			"local":                local,
			"local bad signature":  withSignatureOf(local, local2),
			"local kid idp header": withHeader(t, idp, map[string]any{"alg": "RS256", "typ": "JWT", "kid": e.Issuer().KeyID()}),
			"idp kid local header": withHeader(t, local, map[string]any{"alg": "ES256", "typ": "JWT", "kid": idptest.KID}),
			"idp":                  idp,
			"idp short-lived":      p.Token(t, idpClaims(map[string]any{"exp": now().Add(2 * time.Minute).Unix()})),
			"idp expired":          p.Token(t, idpClaims(map[string]any{"exp": now().Add(-time.Hour).Unix()})),
			"idp bad signature":    withSignatureOf(idp, p.Token(t, idpClaims(map[string]any{"sub": "eve"}))),
			"idp wrong audience":   p.Token(t, idpClaims(map[string]any{"aud": samlEntityInternal})),
			"unknown kid":          alien,
			"malformed":            "not-a-jwt",
			"oversized":            strings.Repeat("a", token.MaxTokenSize+1),
		}
	}
	var all []map[string]string
	// Steps: fresh, cached, past the cache's max age (verified again),
	// past the local tokens' TTL and the short-lived IdP token's exp.
	for _, step := range []time.Duration{0, time.Minute, 11 * time.Minute, 16 * time.Minute, 27 * time.Minute, 45 * time.Minute} {
		clock.Store(t0.Add(step).UnixNano())
		all = append(all, tokens())
		for round := range 2 {
			for _, toks := range all {
				for name, tok := range toks {
					gotC, gotU, gotErr := verifyNow(e, ctx, tok)
					wantC, wantU, wantErr := verifyBefore(ref, ctx, tok)
					if reason.Of(gotErr, reason.OK) != reason.Of(wantErr, reason.OK) || (gotErr == nil) != (wantErr == nil) ||
						(gotErr != nil && gotErr.Error() != wantErr.Error()) {
						t.Fatalf("+%s round %d %s: err %v, want %v", step, round, name, gotErr, wantErr)
					}
					if !reflect.DeepEqual(gotC, wantC) || !reflect.DeepEqual(gotU, wantU) {
						t.Fatalf("+%s round %d %s: claims %v user %+v, want %v %+v", step, round, name, gotC, gotU, wantC, wantU)
					}
				}
			}
		}
		// The local verifier's misses count the tokens it verified, no
		// longer the IdP tokens the JWKS cache answered; its counts are
		// not reported.
		if got, want := e.local.CacheStats(), ref.local.CacheStats(); got.Entries != want.Entries || got.Hits != want.Hits || got.Misses > want.Misses {
			t.Errorf("+%s: local cache %+v, want %+v", step, got, want)
		}
		if got, want := e.jwksVerifier().CacheStats(), ref.jwksVerifier().CacheStats(); got != want {
			t.Errorf("+%s: JWKS cache %+v, want %+v", step, got, want)
		}
	}
	// The cases the table is about did happen.
	clock.Store(t0.UnixNano())
	toks := tokens()
	for name, want := range map[string]reason.Code{
		"local": reason.OK, "idp": reason.OK,
		"local bad signature": reason.SignatureInvalid, "local kid idp header": reason.AlgNotAllowed,
		"idp kid local header": reason.AlgNotAllowed, "unknown kid": reason.UnknownKID,
		"idp expired": reason.TokenExpired, "idp bad signature": reason.SignatureInvalid,
	} {
		if _, _, err := verifyNow(e, ctx, toks[name]); reason.Of(err, reason.OK) != want {
			t.Errorf("%s: %v, want %s", name, err, want)
		}
	}
	clock.Store(t0.Add(16 * time.Minute).UnixNano())
	if _, _, err := verifyNow(e, ctx, toks["local"]); reason.Of(err, reason.OK) != reason.TokenExpired {
		t.Errorf("expired cached local token: %v", err)
	}
	clock.Store(t0.Add(time.Hour).UnixNano())
	if _, _, err := verifyNow(e, ctx, toks["idp"]); reason.Of(err, reason.OK) != reason.TokenExpired {
		t.Errorf("expired cached IdP token: %v", err)
	}
}

// TestSAMLCachedTokenAllocs guards a cached token's verification on an
// engine with [sdk.saml]: one hash for both caches, no header parse or
// unknown-kid error of the local verifier for an IdP token (11
// allocations before; the two left are ValidateToken's own and its
// answer's decision id).
func TestSAMLCachedTokenAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	p := idptest.New(t)
	e := samlEngine(t, p, testkit.TokenKeyFile(t), nil)
	ctx := context.Background()
	local, _, err := e.Issuer().Issue(map[string]any{"sub": "alice", "tenant_id": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	idp := p.Token(t, idptest.Override(idptest.Claims("bob", "acme", "viewer"), map[string]any{"iss": "https://idp.example.com/", "aud": "orders"}))
	for name, tok := range map[string]string{"idp": idp, "local": local} {
		validate := func() {
			if d := e.ValidateToken(ctx, tok); !d.Allowed {
				t.Fatalf("%s token refused: %s", name, d.Reason)
			}
		}
		validate()
		if n := testing.AllocsPerRun(200, validate); n > 2 {
			t.Errorf("cached %s token: %v allocations, want at most 2", name, n)
		}
	}
}
