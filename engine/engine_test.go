package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/audittest"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/reason"
)

// claimsFor returns the claims of user-1 in tenant with roles, valid for
// five minutes.
func claimsFor(tenant string, roles ...string) map[string]any {
	c := idptest.Claims("user-1", tenant, roles...)
	c["email"], c["department"] = "u@example.com", "sales"
	return c
}

type auditSink = audittest.Sink

func newEngine(t testing.TB, cfg config.Config, deps engine.Deps) *engine.Engine {
	t.Helper()
	e, err := engine.New(cfg, deps)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func prodConfig(jwksURL string) config.Config {
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	cfg.SDK.JWKSURL = jwksURL
	cfg.SDK.FailMode = config.FailClosed
	cfg.Tenants = map[string]config.Tenant{"acme": {Plan: "enterprise"}}
	return cfg
}

func TestValidateToken(t *testing.T) {
	p := idptest.New(t)
	e := newEngine(t, prodConfig(p.JWKSURL()), engine.Deps{})
	ctx := context.Background()

	expired := claimsFor("acme", "viewer")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	noTenant := claimsFor("acme", "viewer")
	delete(noTenant, "tenant_id")

	tests := []struct {
		name    string
		token   string
		allowed bool
		code    reason.Code
	}{
		{"valid", p.Token(t, claimsFor("acme", "viewer")), true, reason.OK},
		{"other tenant refused", p.Token(t, claimsFor("globex", "admin")), false, reason.TenantMismatch},
		{"tenant ids are case-sensitive", p.Token(t, claimsFor("ACME", "admin")), false, reason.TenantMismatch},
		{"missing", "", false, reason.TokenMissing},
		{"malformed", "not-a-jwt", false, reason.TokenMalformed},
		{"expired", p.Token(t, expired), false, reason.TokenExpired},
		{"no tenant", p.Token(t, noTenant), false, reason.TenantMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := e.ValidateToken(ctx, tt.token)
			if d.Allowed != tt.allowed || d.Reason != tt.code {
				t.Fatalf("got allowed=%v reason=%s (%s), want %v %s", d.Allowed, d.Reason, d.Message, tt.allowed, tt.code)
			}
			if tt.allowed {
				if d.Subject != "user-1" || d.Claims["department"] != "sales" {
					t.Fatalf("claims not carried through: subject=%q claims=%v", d.Subject, d.Claims)
				}
			} else if d.Claims != nil {
				t.Fatalf("claims on failure: %v", d.Claims)
			}
		})
	}
}

func TestAuthorize(t *testing.T) {
	p := idptest.New(t)
	sink := &auditSink{}
	e := newEngine(t, prodConfig(p.JWKSURL()), engine.Deps{Audit: sink})
	ctx := engine.WithSource(context.Background(), "sdk")

	tests := []struct {
		name    string
		token   string
		in      engine.Input
		allowed bool
		code    reason.Code
		reasons []string
	}{
		{"viewer reads", p.Token(t, claimsFor("acme", "viewer")), engine.Input{Action: "orders:read"}, true, reason.PolicyAllow, []string{}},
		{"viewer cannot delete", p.Token(t, claimsFor("acme", "viewer")), engine.Input{Action: "orders:delete"}, false, reason.PolicyDeny, []string{"role-forbidden: viewer cannot orders:delete"}},
		{"cross tenant", p.Token(t, claimsFor("globex", "admin")), engine.Input{Action: "orders:read"}, false, reason.PolicyDeny, []string{"tenant-mismatch"}},
		{"plan-gated action on enterprise plan", p.Token(t, claimsFor("acme", "billing")), engine.Input{Action: "reports:export"}, true, reason.PolicyAllow, []string{}},
		{"invalid token stops before policy", "garbage", engine.Input{Action: "orders:read"}, false, reason.TokenMalformed, []string{}},
		{
			"caller-supplied user is replaced by claims",
			p.Token(t, claimsFor("acme", "viewer")),
			engine.Input{Action: "orders:delete", User: engine.Input{}.User},
			false, reason.PolicyDeny, []string{"role-forbidden: viewer cannot orders:delete"},
		},
	}
	tests[5].in.User.Roles = []string{"admin"}
	tests[5].in.User.TenantID = "acme"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := e.Authorize(ctx, tt.token, tt.in)
			if err != nil {
				t.Fatalf("Authorize: %v", err)
			}
			if res.Allowed() != tt.allowed || res.Decision.Reason != tt.code {
				t.Fatalf("got allowed=%v reason=%s reasons=%v, want %v %s", res.Allowed(), res.Decision.Reason, res.Decision.DenyReasons, tt.allowed, tt.code)
			}
			if !equal(res.Decision.DenyReasons, tt.reasons) {
				t.Fatalf("deny reasons %q, want %q", res.Decision.DenyReasons, tt.reasons)
			}
			if res.Token.Allowed && (res.Input.User.ID != "user-1" || res.Input.Tenant.Plan != "enterprise" || res.Input.User.Claims["department"] != "sales") {
				t.Fatalf("input not filled from claims and config: %+v", res.Input)
			}
		})
	}
	recs := sink.Records()
	if len(recs) != len(tests) {
		t.Fatalf("%d audit records, want one per decision (%d)", len(recs), len(tests))
	}
	for i, r := range recs {
		if r.DecisionID == "" {
			t.Errorf("audit record %d (%s) has no decision id: every decision needs one", i, r.Reason)
		}
	}
	first := recs[0]
	if first.DecisionID == "" || first.Tenant != "acme" || first.UserID != "user-1" || first.Action != "orders:read" || !first.Allow || first.Source != "sdk" {
		t.Fatalf("audit record incomplete: %+v", first)
	}
}

func TestDevMode(t *testing.T) {
	var cfg config.Config
	cfg.SDK.TenantID = "dev"
	e := newEngine(t, cfg, engine.Deps{})
	if !e.DevMode() {
		t.Fatal("no identity source is development mode")
	}
	d := e.ValidateToken(context.Background(), "any string at all")
	if !d.Allowed || d.Reason != reason.DevAnonymous || d.Claims != nil || d.Subject != engine.AnonymousSubject {
		t.Fatalf("dev decision %+v", d)
	}
	if d := e.ValidateToken(context.Background(), ""); d.Allowed || d.Reason != reason.TokenMissing {
		t.Fatalf("no bearer at all must still be token-missing, got %+v", d)
	}
}

func TestClosedWithoutJWKSIsRefused(t *testing.T) {
	var cfg config.Config
	cfg.SDK.FailMode = config.FailClosed
	if _, err := engine.New(cfg, engine.Deps{}); err == nil {
		t.Fatal("fail_mode=closed without jwks_url accepted")
	}
}

// budgetOfThree is an engine that allows tenant acme 3 requests a minute,
// and a token of an acme viewer.
func budgetOfThree(t *testing.T) (*engine.Engine, string) {
	t.Helper()
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.RateLimit.PerTenant = map[string]int{"acme": 3}
	return newEngine(t, cfg, engine.Deps{}), p.Token(t, claimsFor("acme", "viewer"))
}

func TestRateLimit(t *testing.T) {
	e, tok := budgetOfThree(t)
	for i := 0; i < 3; i++ {
		if res, _ := e.Authorize(context.Background(), tok, engine.Input{Action: "orders:read"}); !res.Allowed() {
			t.Fatalf("request %d within budget denied: %+v", i, res.Decision)
		}
	}
	res, err := e.Authorize(context.Background(), tok, engine.Input{Action: "orders:read"})
	if err != nil || res.Allowed() || res.Decision.Reason != reason.RateLimited || res.Decision.RetryAfter <= 0 {
		t.Fatalf("4th request: %+v err=%v, want rate-limited with retry-after", res.Decision, err)
	}
}

func TestReloadPolicies(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) {
		testkit.WriteFile(t, filepath.Join(dir, "authz.rego"), []byte(body))
	}
	write("package svc.authz\n\ndefault allow := false\n\ndeny_reasons contains \"closed\" if not allow\n")
	var cfg config.Config
	cfg.Policy.Dir = dir
	e := newEngine(t, cfg, engine.Deps{})
	ctx := context.Background()
	if d, _ := e.Evaluate(ctx, engine.Input{Action: "a:b"}); d.Allow || !equal(d.DenyReasons, []string{"closed"}) {
		t.Fatalf("before reload: %+v", d)
	}
	write("package svc.authz\n\nallow := true\n")
	if err := e.ReloadPolicies(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := e.Evaluate(ctx, engine.Input{Action: "a:b"}); !d.Allow {
		t.Fatalf("after reload: %+v", d)
	}
	write("package svc.authz\n\nallow if {\n")
	if err := e.ReloadPolicies(ctx); err == nil {
		t.Fatal("broken policy accepted")
	}
	if d, _ := e.Evaluate(ctx, engine.Input{Action: "a:b"}); !d.Allow {
		t.Fatalf("a failed reload must keep the active set: %+v", d)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestValidateTokenTenants(t *testing.T) {
	p := idptest.New(t)
	ctx := context.Background()
	tests := []struct {
		name     string
		tenantID string
		accepted []string
		token    string
		want     reason.Code
	}{
		{"own tenant", "acme", nil, "acme", reason.OK},
		{"listed tenant", "acme", []string{"globex"}, "globex", reason.OK},
		{"unlisted tenant", "acme", []string{"globex"}, "initech", reason.TenantMismatch},
		{"every tenant when none is configured", "", nil, "initech", reason.OK},
		{"only listed tenants without tenant_id", "", []string{"globex"}, "acme", reason.TenantMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := prodConfig(p.JWKSURL())
			cfg.SDK.TenantID, cfg.SDK.AcceptedTenants = tt.tenantID, tt.accepted
			e := newEngine(t, cfg, engine.Deps{})
			d := e.ValidateToken(ctx, p.Token(t, claimsFor(tt.token, "admin")))
			if d.Reason != tt.want || d.Allowed != (tt.want == reason.OK) {
				t.Fatalf("got allowed=%v reason=%s, want %s", d.Allowed, d.Reason, tt.want)
			}
			if !d.Allowed && (d.Claims != nil || d.Subject != "") {
				t.Fatalf("a refused token carries its identity: %+v", d)
			}
			// Authorize leaves the tenant to the policy: a token of another
			// tenant is a policy decision, never a token failure.
			res, err := e.Authorize(ctx, p.Token(t, claimsFor(tt.token, "admin")), engine.Input{Action: "orders:read"})
			if err != nil || !res.Token.Allowed {
				t.Fatalf("Authorize token decision = %+v, %v; want the token accepted", res.Token, err)
			}
		})
	}
}

func TestAudiencesUnsetWarnsAtStart(t *testing.T) {
	p := idptest.New(t)
	tests := []struct {
		name      string
		audiences []string
		warn      bool
	}{
		{"unset", nil, true},
		{"set", []string{"orders-api"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf testkit.SyncBuffer
			cfg := prodConfig(p.JWKSURL())
			cfg.JWT.Audiences = tt.audiences
			newEngine(t, cfg, engine.Deps{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
			got := strings.Contains(buf.String(), `"level":"WARN","msg":"jwt.audiences is unset`)
			if got != tt.warn {
				t.Fatalf("audience warning logged = %v, want %v; log:\n%s", got, tt.warn, buf.String())
			}
		})
	}
}

func TestValidateTokenCountsTowardTheRateLimit(t *testing.T) {
	e, tok := budgetOfThree(t)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if d := e.ValidateToken(ctx, tok); !d.Allowed {
			t.Fatalf("validation %d within budget refused: %+v", i, d)
		}
	}
	// Validations and authorizations share the tenant's budget.
	if res, _ := e.Authorize(ctx, tok, engine.Input{Action: "orders:read"}); !res.Allowed() {
		t.Fatalf("third request within budget denied: %+v", res.Decision)
	}
	if d := e.ValidateToken(ctx, tok); d.Allowed || d.Reason != reason.RateLimited || d.Claims != nil {
		t.Fatalf("validation past the budget: %+v, want rate-limited", d)
	}
}

// failingLimiter is a rate limiter whose store is down.
type failingLimiter struct{}

func (failingLimiter) Allow(context.Context, string) (bool, time.Duration, error) {
	return false, 0, errors.New("redis: connection refused")
}

func TestRateLimiterOutageWarnsOncePerInterval(t *testing.T) {
	p := idptest.New(t)
	var (
		buf testkit.SyncBuffer
		mu  sync.Mutex
		now = time.Now()
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEngine(t, prodConfig(p.JWKSURL()), engine.Deps{
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Limiter: failingLimiter{}, Now: clock,
	})
	tok := p.Token(t, claimsFor("acme", "viewer"))
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		if res, err := e.Authorize(ctx, tok, engine.Input{Action: "orders:read"}); err != nil || !res.Allowed() {
			t.Fatalf("request %d with the limiter down: %+v %v, want allowed uncounted", i, res.Decision, err)
		}
		if d := e.ValidateToken(ctx, tok); !d.Allowed {
			t.Fatalf("validation %d with the limiter down: %+v", i, d)
		}
	}
	if n := strings.Count(buf.String(), "rate limiter unavailable"); n != 1 {
		t.Fatalf("%d warnings for 100 requests, want 1:\n%s", n, buf.String())
	}
	mu.Lock()
	now = now.Add(31 * time.Second)
	mu.Unlock()
	e.ValidateToken(ctx, tok)
	if n := strings.Count(buf.String(), "rate limiter unavailable"); n != 2 || !strings.Contains(buf.String(), `"uncounted":100`) {
		t.Fatalf("after the interval: %d warnings, want 2, the second counting 100 uncounted requests:\n%s", n, buf.String())
	}
}
