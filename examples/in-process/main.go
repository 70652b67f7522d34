// Command in-process embeds the svc decision engine in the application,
// without a sidecar. With no SVC_* variables set it runs in development
// mode on the embedded default policy, so it needs no file and no
// identity provider:
//
//	go run ./examples/in-process
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
)

func main() {
	// "" reads no file: the SVC_* variables, then the defaults. With a
	// file: config.Load("svc.toml", os.LookupEnv).
	cfg, err := config.Load("", os.LookupEnv)
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(cfg, engine.Deps{Logger: slog.Default()})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()

	// Token only: verified against the JWKS (any string in development mode).
	d := e.ValidateToken(ctx, "any-token")
	fmt.Println("validate:", d.Allowed, d.Reason, d.Subject)

	// Token and policy: input.user is filled from the verified claims.
	res, err := e.Authorize(ctx, "any-token", engine.Input{Action: "orders:read"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("authorize:", res.Allowed(), res.Decision.Reason, res.Decision.DenyReasons)

	// Policy only, on an input the caller built.
	in := engine.Input{Action: "orders:read"}
	in.User.ID, in.User.TenantID, in.User.Roles = "u-1", "acme", []string{"viewer"}
	in.Resource.Tenant, in.Tenant.ID, in.Tenant.Plan = "acme", "acme", "team"
	dec, err := e.Evaluate(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("evaluate:", dec.Allow, dec.Reason)

	// Re-read policy.dir and swap it in atomically; on error the active
	// set stays.
	if err := e.ReloadPolicies(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("reloaded:", len(e.Policies().Files()), "policy file(s)")
}
