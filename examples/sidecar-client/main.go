// Command sidecar-client is an HTTP service whose /orders/ routes ask the
// svc sidecar (gRPC at [::1]:50051) about every request: the sidecar
// verifies the bearer token and evaluates the policy.
//
//	make run                              # the sidecar, in another terminal
//	go run ./examples/sidecar-client
//	curl -i localhost:8080/orders/1 -H 'Authorization: Bearer anything'
package main

import (
	"fmt"
	"log"
	"net/http"

	"github.com/svc-dev/svc/authz"
)

func main() {
	// Sidecar unreachable: FailOpen lets the request through as
	// "anonymous" (reason "fail-open"); FailClosed answers 503.
	// An invalid token is refused with 401 in both modes.
	client, err := authz.NewClient("[::1]:50051", authz.ClientOptions{FailMode: authz.FailClosed})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	mux := http.NewServeMux()
	mux.Handle("/orders/", authz.Middleware(client, authz.MiddlewareOptions{
		// Optional: also authorize the action against the policy, 403 on a
		// denial. Without it the middleware only validates the token.
		Action: func(r *http.Request) string { return "orders:read" },
	})(http.HandlerFunc(ordersHandler)))

	log.Println("listening on localhost:8080")
	log.Fatal(http.ListenAndServe("localhost:8080", mux))
}

// ordersHandler runs only for requests the sidecar admitted.
func ordersHandler(w http.ResponseWriter, r *http.Request) {
	// Subject is "anonymous" in development mode and on fail-open.
	user, _ := authz.UserFrom(r.Context())
	fmt.Fprintf(w, "orders of %s in tenant %q\n", user.Subject, user.TenantID)
}
