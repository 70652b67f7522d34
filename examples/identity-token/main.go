// Command identity-token is an upstream service behind a proxy that
// checks with the svc sidecar: it admits a request on the sidecar's
// signed X-Svc-Identity header alone, verified against the sidecar's
// /.well-known/jwks.json, without calling the sidecar (docs/identity-token.md).
//
//	SVC_IDENTITY_TOKEN_SIGNING_KEY_FILE=key.pem make run   # the sidecar
//	go run ./examples/identity-token                       # on :8081
package main

import (
	"fmt"
	"log"
	"net/http"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/identitytoken"
)

func main() {
	var handler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := authz.UserFrom(r.Context())
		fmt.Fprintf(w, "hello %s of %s (decision %s)\n", u.Subject, u.TenantID, u.DecisionID)
	})
	v, err := identitytoken.New(identitytoken.Options{
		JWKSURL:  "http://127.0.0.1:7700/.well-known/jwks.json",
		Audience: "orders.internal", // this service, as the proxy names it
	})
	if err != nil {
		log.Fatal(err)
	}
	handler = authz.Middleware(nil, authz.MiddlewareOptions{Identity: v})(handler)
	// authz.UserFrom(r.Context()): Subject, TenantID, Claims, DecisionID
	log.Fatal(http.ListenAndServe("127.0.0.1:8081", handler))
}
