package sidecar

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
)

// With [sdk.saml] and [sdk.oidc] both, the sign-in listener serves both
// gateways: OpenID Connect under its prefix (its login page offers SAML
// too), SAML everywhere else, as alone; status shows both.
func TestSignInListenerServesSAMLAndOIDC(t *testing.T) {
	cfg, _ := samlConfig(t)
	cfg.SDK.OIDC = &config.OIDC{IssuerURL: "http://127.0.0.1:1", ClientID: "app", RedirectURL: "https://shop.example/auth/oidc/callback"}
	r := startSidecar(t, cfg)
	base := "http://" + r.SAMLAddr().String()
	get := func(path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Accept", "text/html")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/auth/oidc/login?return_to=/orders"); code != http.StatusOK ||
		!strings.Contains(body, "/auth/oidc/login?provider=default") || !strings.Contains(body, "/auth/saml/login?return_to=%2Forders") {
		t.Errorf("OIDC login page: %d %s", code, body)
	}
	if code, body := get("/auth/saml/metadata"); code != http.StatusOK || !strings.Contains(body, "EntityDescriptor") {
		t.Errorf("SAML metadata: %d %.200s", code, body)
	}
	resp, err := http.Get("http://" + r.HTTPAddr().String() + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		SAML *json.RawMessage `json:"saml"`
		OIDC *struct {
			LogoutScope string `json:"logout_scope"`
			Providers   []struct {
				Name string `json:"name"`
			} `json:"providers"`
		} `json:"oidc"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.SAML == nil || st.OIDC == nil || st.OIDC.LogoutScope != "process" || len(st.OIDC.Providers) != 1 {
		t.Errorf("status: saml %v, oidc %+v; want both, logout scope process", st.SAML != nil, st.OIDC)
	}
}
