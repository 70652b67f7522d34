package engine_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/apikey"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/introspect"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/reason"
)

// introspectionEndpoint answers RFC 7662 requests of the client
// "svc-gateway" from answers (token → body; unknown tokens inactive).
type introspectionEndpoint struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers map[string]string
	calls   int
	down    bool
}

func newIntrospectionEndpoint(t testing.TB, answers map[string]string) *introspectionEndpoint {
	ep := &introspectionEndpoint{answers: answers}
	ep.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ep.mu.Lock()
		defer ep.mu.Unlock()
		ep.calls++
		if ep.down {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		if id, secret, ok := r.BasicAuth(); !ok || id != "svc-gateway" || secret != "s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		body, ok := ep.answers[r.PostFormValue("token")]
		if !ok {
			body = `{"active":false}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(ep.srv.Close)
	return ep
}

func (ep *introspectionEndpoint) setDown(down bool) {
	ep.mu.Lock()
	ep.down = down
	ep.mu.Unlock()
}

func (ep *introspectionEndpoint) callCount() int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.calls
}

// introspectionConfig is a configuration whose one identity source is
// the endpoint.
func introspectionConfig(t testing.TB, url string) config.Config {
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	cfg.SDK.FailMode = config.FailClosed
	cfg.Introspection = config.Introspection{URL: url, ClientID: "svc-gateway",
		ClientSecretFile: testkit.TempFile(t, "secret", []byte("s3cret\n"))}
	return cfg
}

const opaqueAlice = "2YotnFZFEjr1zCsicMWpAA"

func TestIntrospectionDecides(t *testing.T) {
	exp := time.Now().Add(time.Hour).Unix()
	ep := newIntrospectionEndpoint(t, map[string]string{
		opaqueAlice: `{"active":true,"sub":"alice","tenant_id":"acme","scope":"viewer reports","client_id":"web","iss":"https://login.example.com","exp":` +
			itoa(exp) + `,"department":"sales"}`,
		"no-tenant": `{"active":true,"sub":"bob"}`,
		"bad":       `not json`,
		"dpop-bound": `{"active":true,"sub":"alice","tenant_id":"acme","scope":"admin","token_type":"DPoP","cnf":{"jkt":"0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"},"exp":` +
			itoa(exp) + `}`,
		"refresh": `{"active":true,"sub":"alice","tenant_id":"acme","scope":"admin","token_type":"refresh_token","exp":` + itoa(exp) + `}`,
	})
	e := newEngine(t, introspectionConfig(t, ep.srv.URL), engine.Deps{})
	if e.DevMode() {
		t.Fatal("introspection.url did not turn development mode off")
	}
	ctx := context.Background()
	res, err := e.Authorize(ctx, opaqueAlice, engine.Input{Action: "orders:read"})
	if err != nil || !res.Allowed() {
		t.Fatalf("active opaque token: %+v err=%v", res, err)
	}
	if tok := res.Token; tok.Kind != engine.KindIntrospection || tok.Subject != "alice" || tok.TenantID != "acme" {
		t.Fatalf("token decision = %+v", tok)
	}
	u := res.Input.User
	if strings.Join(u.Roles, ",") != "viewer,reports" || u.Role != "viewer" || u.Claims["department"] != "sales" {
		t.Fatalf("user = %+v", u)
	}
	if id := res.Input.Identity; id == nil || id.Kind != engine.KindIntrospection || id.ID != "alice" || id.Issuer != "https://login.example.com" {
		t.Fatalf("identity = %+v, want kind introspection issued by the answer's iss", id)
	}
	for _, tc := range []struct {
		tok  string
		want reason.Code
	}{
		{"revoked-token", reason.TokenInactive},
		{"no-tenant", reason.TenantMissing},
		{"bad", reason.IntrospectionInvalid},
		// Bound to its client's DPoP key, which a bearer request does not
		// prove; a refresh token is for the authorization server only.
		{"dpop-bound", reason.TokenInactive},
		{"refresh", reason.TokenInactive},
	} {
		if d := e.ValidateToken(ctx, tc.tok); d.Allowed || d.Reason != tc.want {
			t.Errorf("%s: %+v, want %s", tc.tok, d, tc.want)
		}
	}
	calls := ep.callCount()
	// A JWS is verified as a JWT, never sent to the endpoint.
	jws := idptest.New(t).Token(t, claimsFor("acme", "viewer"))
	if d := e.ValidateToken(ctx, jws); d.Allowed || d.Reason == reason.TokenInactive {
		t.Fatalf("JWS without a JWT source: %+v", d)
	}
	if ep.callCount() != calls {
		t.Fatal("a JWS was introspected")
	}
	// The endpoint failing, the cached answer about alice still serves
	// until cache_ttl; a token never seen is introspection-unavailable.
	ep.setDown(true)
	if d := e.ValidateToken(ctx, opaqueAlice); !d.Allowed {
		t.Fatalf("cached answer not served: %+v", d)
	}
	if d := e.ValidateToken(ctx, "never-seen"); d.Reason != reason.IntrospectionUnavailable {
		t.Fatalf("endpoint down: %+v, want introspection-unavailable", d)
	}
	st := e.Status().Introspection
	if st == nil || st.URL != ep.srv.URL || st.CacheEntries == 0 || st.Failures == 0 || !strings.Contains(st.LastError, "502") {
		t.Fatalf("status = %+v", st)
	}
}

// TestIntrospectionAudiences: with jwt.audiences set, an active answer
// must name one of them in aud, as a JWT must; a token the provider
// issued for another service, or for none, is audience-mismatch.
func TestIntrospectionAudiences(t *testing.T) {
	ep := newIntrospectionEndpoint(t, map[string]string{
		"for-orders":  `{"active":true,"sub":"alice","tenant_id":"acme","roles":["viewer"],"aud":["billing","orders"]}`,
		"for-billing": `{"active":true,"sub":"alice","tenant_id":"acme","roles":["viewer"],"aud":"billing"}`,
		"for-none":    `{"active":true,"sub":"alice","tenant_id":"acme","roles":["viewer"]}`,
	})
	cfg := introspectionConfig(t, ep.srv.URL)
	cfg.JWT.Audiences = []string{"orders"}
	e := newEngine(t, cfg, engine.Deps{})
	ctx := context.Background()
	if d := e.ValidateToken(ctx, "for-orders"); !d.Allowed {
		t.Fatalf("aud naming this service: %+v", d)
	}
	for _, tok := range []string{"for-billing", "for-none"} {
		if d := e.ValidateToken(ctx, tok); d.Allowed || d.Reason != reason.AudienceMismatch {
			t.Errorf("%s: %+v, want audience-mismatch", tok, d)
		}
	}
	// Without jwt.audiences, aud is the policy's to read.
	open := newEngine(t, introspectionConfig(t, ep.srv.URL), engine.Deps{})
	if d := open.ValidateToken(ctx, "for-billing"); !d.Allowed {
		t.Fatalf("without jwt.audiences: %+v", d)
	}
}

func TestIntrospectionAlongsideJWT(t *testing.T) {
	p := idptest.New(t)
	ep := newIntrospectionEndpoint(t, map[string]string{
		opaqueAlice: `{"active":true,"sub":"alice","tenant_id":"acme","roles":["viewer"]}`,
	})
	cfg := introspectionConfig(t, ep.srv.URL)
	cfg.SDK.JWKSURL = p.JWKSURL()
	e := newEngine(t, cfg, engine.Deps{})
	ctx := context.Background()
	if d := e.ValidateToken(ctx, p.Token(t, claimsFor("acme", "viewer"))); !d.Allowed || d.Kind == engine.KindIntrospection {
		t.Fatalf("JWT: %+v", d)
	}
	if d := e.ValidateToken(ctx, opaqueAlice); !d.Allowed || d.Kind != engine.KindIntrospection {
		t.Fatalf("opaque: %+v", d)
	}
}

func TestIntrospectionSharedByReplicas(t *testing.T) {
	ep := newIntrospectionEndpoint(t, map[string]string{
		opaqueAlice: `{"active":true,"sub":"alice","tenant_id":"acme","roles":["viewer"]}`,
	})
	cfg := introspectionConfig(t, ep.srv.URL)
	cfg.RateLimit.RedisAddr = redistest.Start(t)
	cfg.RateLimit.RedisTimeout = config.Duration{Duration: 10 * time.Second}
	ctx := context.Background()
	for i := range 2 {
		e := newEngine(t, cfg, engine.Deps{})
		if d := e.ValidateToken(ctx, opaqueAlice); !d.Allowed {
			t.Fatalf("replica %d: %+v", i, d)
		}
		if st := e.Status().Introspection; st == nil || !st.Shared {
			t.Fatalf("replica %d status = %+v, want shared", i, st)
		}
	}
	if n := ep.callCount(); n != 1 {
		t.Fatalf("%d calls for one token on two replicas sharing Redis, want 1", n)
	}
}

func TestIntrospectionSecretFile(t *testing.T) {
	ep := newIntrospectionEndpoint(t, nil)
	cfg := introspectionConfig(t, ep.srv.URL)
	cfg.Introspection.ClientSecretFile = filepath.Join(t.TempDir(), "missing")
	for name, err := range map[string]error{"New": newErr(cfg), "Check": engine.Check(cfg)} {
		var se *engine.SettingError
		if !errors.As(err, &se) || se.Key != "introspection.client_secret_file" {
			t.Errorf("%s: %v, want a setting error of introspection.client_secret_file", name, err)
		}
	}
	cfg.Introspection.ClientSecretFile = testkit.TempFile(t, "empty", []byte("\n"))
	if err := newErr(cfg); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty secret file: %v", err)
	}
}

func newErr(cfg config.Config) error {
	e, err := engine.New(cfg, engine.Deps{})
	if err == nil {
		e.Close()
	}
	return err
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// BenchmarkValidateTokenIntrospected is ValidateToken of an opaque token
// whose answer the in-process cache holds: the whole engine path of a
// cache hit, with no call to the endpoint.
func BenchmarkValidateTokenIntrospected(b *testing.B) {
	ep := newIntrospectionEndpoint(b, map[string]string{
		opaqueAlice: `{"active":true,"sub":"alice","tenant_id":"acme","roles":["viewer"]}`,
	})
	cfg := introspectionConfig(b, ep.srv.URL)
	cfg.RateLimit.Disabled = true
	e := newEngine(b, cfg, engine.Deps{Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	if d := e.ValidateToken(ctx, opaqueAlice); !d.Allowed {
		b.Fatalf("%+v", d)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if d := e.ValidateToken(ctx, opaqueAlice); !d.Allowed {
			b.Fatalf("%+v", d)
		}
	}
	b.StopTimer()
	if n := ep.callCount(); n != 1 {
		b.Fatalf("%d calls to the endpoint, want 1", n)
	}
}

// A bearer with the API-key prefix is an API key on every door: judged
// against api_keys.file, or refused as a key without one, and never sent
// to the introspection endpoint as an opaque token.
func TestIntrospectionNeverSeesAPIKeys(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "api-keys.toml")
	_, viewer, err := apikey.Append(keys, apikey.NewEntry{Tenant: "acme", Subject: "reporting", Roles: []string{"viewer"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		keyFile string
		cred    engine.Credential
		allowed bool
		code    reason.Code
	}{
		{"key as bearer, keys configured", keys, engine.BearerToken(viewer), true, reason.OK},
		{"wrong key as bearer", keys, engine.BearerToken(testkit.WrongSecret(viewer)), false, reason.APIKeyUnknown},
		{"malformed key as bearer", keys, engine.BearerToken("svck_nope"), false, reason.APIKeyMalformed},
		{"key as bearer, no keys configured", "", engine.BearerToken(viewer), false, reason.APIKeyUnknown},
		{"malformed key as bearer, no keys configured", "", engine.BearerToken("svck_nope"), false, reason.APIKeyMalformed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ep := newIntrospectionEndpoint(t, map[string]string{
				viewer: `{"active":true,"sub":"mallory","tenant_id":"acme"}`,
			})
			cfg := introspectionConfig(t, ep.srv.URL)
			cfg.APIKeys.File = tt.keyFile
			e := newEngine(t, cfg, engine.Deps{})
			res, err := e.Decide(t.Context(), engine.Request{Scope: engine.ScopeToken, Credential: tt.cred})
			if err != nil {
				t.Fatal(err)
			}
			if d := res.Token; d.Allowed != tt.allowed || d.Reason != tt.code {
				t.Fatalf("token decision %+v, want allowed %v %s", d, tt.allowed, tt.code)
			}
			if tt.allowed && (res.Token.Kind != engine.KindAPIKey || res.Token.Subject != "reporting") {
				t.Fatalf("token decision %+v, want the key's subject, of kind %s", res.Token, engine.KindAPIKey)
			}
			if n := ep.callCount(); n != 0 {
				t.Fatalf("the introspection endpoint was asked %d times", n)
			}
		})
	}
}

// A value written straight into the shared Redis, without the MAC only
// replicas that know the client secret can make, is not an answer: the
// endpoint decides, and the rejection is counted.
func TestIntrospectionSharedTierRefusesForgedValues(t *testing.T) {
	ep := newIntrospectionEndpoint(t, nil)
	cfg := introspectionConfig(t, ep.srv.URL)
	cfg.RateLimit.RedisAddr = redistest.Start(t)
	cfg.RateLimit.RedisTimeout = config.Duration{Duration: 10 * time.Second}
	rc := redis.NewClient(&redis.Options{Addr: cfg.RateLimit.RedisAddr})
	t.Cleanup(func() { rc.Close() })
	const forged = "never-issued-opaque-token"
	sum := sha256.Sum256([]byte(forged))
	fresh := time.Now().Add(time.Hour).UnixNano()
	if err := rc.Set(t.Context(), introspect.RemoteKeyPrefix+hex.EncodeToString(sum[:]),
		itoa(fresh)+"\n"+`{"active":true,"sub":"mallory","tenant_id":"acme","roles":["admin"]}`, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	e := newEngine(t, cfg, engine.Deps{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if d := e.ValidateToken(t.Context(), forged); d.Allowed || d.Reason != reason.TokenInactive {
		t.Fatalf("forged shared answer: %+v, want the endpoint's token-inactive", d)
	}
	if n := ep.callCount(); n != 1 {
		t.Fatalf("%d calls, want the endpoint asked once", n)
	}
	if got := metrictest.Values(metrictest.Collect(t, reader), "svc.introspection.cache_rejected")[""]; got != 1 {
		t.Fatalf("svc.introspection.cache_rejected = %d, want 1", got)
	}
}

// TestIntrospectionNotBefore: an active answer whose nbf is ahead of the
// clock by more than jwt.clock_skew names a token that may not be used
// yet, as a JWT's nbf does: token-inactive, on every surface.
func TestIntrospectionNotBefore(t *testing.T) {
	now := time.Now()
	ep := newIntrospectionEndpoint(t, map[string]string{
		"later":  `{"active":true,"sub":"alice","tenant_id":"acme","roles":["viewer"],"nbf":` + itoa(now.Add(10*time.Minute).Unix()) + `}`,
		"inskew": `{"active":true,"sub":"bob","tenant_id":"acme","roles":["viewer"],"nbf":` + itoa(now.Add(2*time.Second).Unix()) + `}`,
	})
	cfg := introspectionConfig(t, ep.srv.URL)
	cfg.JWT.ClockSkew = config.Duration{Duration: 10 * time.Second}
	e := newEngine(t, cfg, engine.Deps{})
	ctx := context.Background()
	if d := e.ValidateToken(ctx, "later"); d.Allowed || d.Reason != reason.TokenInactive {
		t.Fatalf("nbf ten minutes ahead: %+v, want token-inactive", d)
	}
	if res, err := e.Authorize(ctx, "later", engine.Input{Action: "orders:read"}); err != nil || res.Allowed() || res.Token.Reason != reason.TokenInactive {
		t.Fatalf("nbf ten minutes ahead: %+v err=%v, want token-inactive", res, err)
	}
	if d := e.ValidateToken(ctx, "inskew"); !d.Allowed {
		t.Fatalf("nbf within jwt.clock_skew: %+v", d)
	}
}
