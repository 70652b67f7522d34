package samlgw_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit/samltest"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw"
)

// TestStartAndMount: a gateway started on an embedded engine and mounted
// in an application's mux serves its endpoints under the path prefix,
// signs with the engine's issuer, and leaves the application's own routes
// alone; Close may be called twice. An engine without [sdk.saml] is
// refused.
func TestStartAndMount(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	md := samltest.MetadataFile(t, testIdP)
	cfg := config.Config{SDK: config.SDK{FailMode: config.FailClosed, SAML: &config.SAML{
		EntityID: entityID, ACSURL: acsURL, IDPMetadataFile: md, PathPrefix: "/sso",
	}}}
	e, err := engine.New(cfg, engine.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	gw, err := samlgw.Start(e, samlgw.Deps{Logger: quiet, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /app", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "app") })
	if p := samlgw.Mount(mux, gw.Gateway); p != "/sso/" {
		t.Errorf("Mount registered %q, want /sso/", p)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/sso/metadata"); code != 200 || !strings.Contains(body, entityID) {
		t.Errorf("metadata: %d %.200s", code, body)
	}
	if code, body := get("/sso/jwks.json"); code != 200 || !strings.Contains(body, e.Issuer().KeyID()) {
		t.Errorf("jwks: %d %s, want the engine issuer's key %s", code, body, e.Issuer().KeyID())
	}
	if code, body := get("/sso/nope"); code != 404 || !strings.Contains(body, string(reason.SAMLNotFound)) {
		t.Errorf("unknown endpoint: %d %s", code, body)
	}
	if code, body := get("/app"); code != 200 || body != "app" {
		t.Errorf("the application's route: %d %s", code, body)
	}
	if gw.PathPrefix() != "/sso" || gw.CookieName() != config.DefaultSAMLCookieName {
		t.Errorf("PathPrefix %q CookieName %q", gw.PathPrefix(), gw.CookieName())
	}
	if err := gw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gw.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	plain, err := engine.New(config.Config{}, engine.Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := samlgw.Start(plain, samlgw.Deps{Logger: quiet}); err == nil || !strings.Contains(err.Error(), "[sdk.saml]") {
		t.Errorf("Start without [sdk.saml]: %v", err)
	}
	if _, err := samlgw.Start(nil, samlgw.Deps{}); err == nil {
		t.Error("Start(nil) succeeded")
	}
}
