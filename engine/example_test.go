package engine_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
)

// An Engine with no identity source (no jwks_url, no [sdk.saml]) runs in
// development mode: every bearer string is accepted as the anonymous
// subject.
func ExampleEngine_ValidateToken() {
	var cfg config.Config // defaults: no jwks_url, no [sdk.saml]
	e, err := engine.New(cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	d := e.ValidateToken(context.Background(), "any-token")
	fmt.Println(d.Allowed, d.Reason, d.Subject)
	// Output: true dev-anonymous anonymous
}

// Evaluate runs the active policy (here the embedded default) on an input
// the caller built, for example in a test or an admin tool.
func ExampleEngine_Evaluate() {
	var cfg config.Config
	e, err := engine.New(cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	in := engine.Input{Action: "orders:delete"}
	in.User.ID, in.User.TenantID, in.User.Role, in.User.Roles = "u1", "acme", "viewer", []string{"viewer"}
	in.Resource.Tenant, in.Tenant.ID = "acme", "acme"

	d, err := e.Evaluate(context.Background(), in)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Allow, d.Reason, d.DenyReasons)
	// Output: false policy-deny [role-forbidden: viewer cannot orders:delete]
}

// Authorize verifies the token, fills input.user from its claims and
// input.tenant from the configuration, then evaluates the policy.
func ExampleEngine_Authorize() {
	var cfg config.Config
	cfg.SDK.TenantID = "acme"
	e, err := engine.New(cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer e.Close()

	res, err := e.Authorize(context.Background(), "dev-token", engine.Input{Action: "orders:read"})
	if err != nil {
		panic(err)
	}
	// In development mode the anonymous user has no role.
	fmt.Println(res.Token.Reason, res.Allowed(), res.Decision.DenyReasons)
	// Output: dev-anonymous false [no-role]
}
