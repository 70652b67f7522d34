package authz_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/servertest"
)

// A protected route in-process, on an engine in development mode (no
// identity provider): any bearer string is accepted as "anonymous".
func ExampleMiddleware() {
	e, err := engine.New(config.Config{SDK: config.SDK{TenantID: "acme"}}, engine.Deps{Logger: servertest.QuietLogger()})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()

	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := authz.UserFrom(r.Context())
		fmt.Fprintf(w, "hello %s (%s)", u.Subject, u.Reason)
	})
	h := authz.Middleware(server.Local(e), authz.MiddlewareOptions{})(orders)

	for _, auth := range []string{"Bearer anything", ""} {
		req := httptest.NewRequest(http.MethodGet, "/orders", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// 200 hello anonymous (dev-anonymous)
	// 401 {"allow":false,"deny_reasons":[],"reason":"token-missing"}
}

// An application asking the sidecar for decisions, failing closed.
func ExampleNewClient() {
	c, err := authz.NewClient("[::1]:50051", authz.ClientOptions{FailMode: authz.FailClosed, Timeout: 500 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	d, err := c.Authorize(context.Background(), authz.AuthorizeRequest{
		Token:    "<bearer token>",
		Action:   "orders:read",
		Resource: authz.Resource{ID: "o-1"},
	})
	switch {
	case errors.Is(err, authz.ErrUnavailable):
		fmt.Println("503: sidecar unavailable")
	case err != nil:
		fmt.Println("500:", err)
	case !d.Allowed:
		fmt.Println("denied:", d.Reason, d.DenyReasons)
	default:
		fmt.Println("allowed for", d.Subject)
	}
}
