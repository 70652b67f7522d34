package server_test

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/servertest"
)

// Serving the decision API: the gRPC service and its local HTTP mirror.
func ExampleServer_RegisterHTTP() {
	e, err := engine.New(config.Config{SDK: config.SDK{TenantID: "acme"}}, engine.Deps{Logger: servertest.QuietLogger()})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	s, err := server.New(e, server.Options{})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	s.RegisterHTTP(mux)

	req := httptest.NewRequest(http.MethodPost, authz.PathValidateToken, strings.NewReader(`{"token":"anything"}`))
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	var d authz.TokenDecision
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Code, d.Allowed, d.Reason, d.Subject, d.TenantID, d.DecisionID != "")
	// Output:
	// 200 true dev-anonymous anonymous acme true
}

// The authz middleware deciding in-process, without a sidecar.
func ExampleLocal() {
	e, err := engine.New(config.Config{SDK: config.SDK{TenantID: "acme"}}, engine.Deps{Logger: servertest.QuietLogger()})
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close()
	h := authz.Middleware(server.Local(e), authz.MiddlewareOptions{
		Action: func(*http.Request) string { return "orders:read" },
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := authz.UserFrom(r.Context())
		fmt.Fprintln(w, "hello", u.Subject)
	}))
	req := httptest.NewRequest(http.MethodGet, "/orders/1", nil)
	req.Header.Set("Authorization", "Bearer anything")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var body authz.DenyBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Code, body.Reason, body.DenyReasons)
	// Output:
	// 403 policy-deny [no-role]
}
