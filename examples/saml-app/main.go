// Command saml-app is a web application that signs its users in with SAML
// and authorizes them in-process, without a sidecar: the engine, the SAML
// gateway (package samlgw) and the authz middleware run in this process.
// The gateway answers the identity provider under /auth/saml and sets the
// session cookie; the middleware takes the token from that cookie and the
// engine verifies it from its own keys, then evaluates the policy.
//
//	SVC_SAML_ENTITY_ID=http://localhost:8080/auth/saml/metadata \
//	SVC_SAML_ACS_URL=http://localhost:8080/auth/saml/acs \
//	SVC_SAML_IDP_METADATA_FILE=idp.xml \
//	SVC_TENANT_ID=acme SVC_FAIL_MODE=closed \
//	go run ./examples/saml-app
//
// then open http://localhost:8080/ and sign in. APP_ADDR sets the listen
// address (default localhost:8080).
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/samlgw"
)

func main() {
	addr := os.Getenv("APP_ADDR")
	if addr == "" {
		addr = "localhost:8080"
	}
	// The SVC_* variables, then the defaults; [sdk.saml] is required.
	cfg, err := config.Load("", os.LookupEnv)
	if err != nil {
		log.Fatal(err)
	}
	e, err := engine.New(cfg, engine.Deps{Logger: slog.Default()})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	// The gateway signs its tokens with the engine's issuer, so the engine
	// verifies them locally. Close stops its IdP metadata refresh.
	// ListenAddr tells the gateway where it is served: SVC_ENV=development
	// is honoured only on a loopback address.
	gw, err := samlgw.Start(e, samlgw.Deps{Logger: slog.Default(), ListenAddr: addr})
	if err != nil {
		log.Fatal(err)
	}
	defer gw.Close()

	mux := http.NewServeMux()
	samlgw.Mount(mux, gw.Gateway) // /auth/saml/login, /acs, /metadata, /jwks.json, /logout
	// server.Local(e) reports the engine's sdk.saml.cookie_name, so the
	// middleware reads the session cookie when there is no Authorization
	// header.
	protect := authz.Middleware(server.Local(e), authz.MiddlewareOptions{
		Action: func(*http.Request) string { return "orders:read" },
	})
	mux.Handle("/orders/", protect(http.HandlerFunc(orders)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "sign in: %s/login?return_to=/orders/1\n", gw.PathPrefix())
	})

	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Println("listening on", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Print(err)
	}
}

// orders runs only for users the policy allowed.
func orders(w http.ResponseWriter, r *http.Request) {
	user, _ := authz.UserFrom(r.Context())
	fmt.Fprintf(w, "orders of %s in tenant %q, roles %v\n", user.Subject, user.TenantID, user.Claims["roles"])
}
