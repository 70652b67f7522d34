package samlgw

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit/samltest"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/issuer"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// FuzzGatewayHTTP sends arbitrary requests to every endpoint of a running
// gateway: whatever a client sends, the answer is never a 5xx, and a 4xx
// is a JSON refusal with a code.
func FuzzGatewayHTTP(f *testing.F) {
	g, idp := fuzzGateway(f, true)
	h := g.Handler()
	doc, err := idp.Sign(benchResponse())
	if err != nil {
		f.Fatal(err)
	}
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}, "RelayState": {"/x"}}.Encode()
	f.Add("POST", "/auth/saml/acs", "application/x-www-form-urlencoded", "application/json", form)
	f.Add("POST", "/auth/saml/acs", "application/x-www-form-urlencoded", "", "SAMLResponse=%%%")
	f.Add("POST", "/auth/saml/acs", "multipart/form-data; boundary=x", "", "--x\r\n")
	f.Add("GET", "/auth/saml/login?return_to=%2F%2Fevil", "", "", "")
	f.Add("GET", "/auth/saml/logout?return_to=/a", "", "application/json", "")
	f.Add("GET", "/auth/saml/metadata", "", "", "")
	f.Add("PUT", "/auth/saml/jwks.json", "", "", "")
	f.Fuzz(func(t *testing.T, method, target, contentType, accept, body string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		req, err := http.NewRequest(method, "http://sp.example"+target, strings.NewReader(body))
		if err != nil {
			return // not a request a server could receive
		}
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s: %d %s", method, target, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var r refusal
			raw, _ := io.ReadAll(rec.Body)
			if json.Unmarshal(raw, &r) != nil || r.Error == "" || r.Message == "" {
				t.Fatalf("%s %s: %d without a JSON refusal: %q", method, target, rec.Code, raw)
			}
		}
	})
}

// fuzzGateway is a gateway of the bench IdP, closed when f ends, whose
// replay store accepts every assertion, so that each fuzz input meets
// the same gateway.
func fuzzGateway(f *testing.F, allowIDPInitiated bool) (*Gateway, *testidp.IdP) {
	f.Helper()
	_, _, idp := benchSetup(f)
	md := samltest.MetadataFile(f, idp)
	cfg := config.Config{SDK: config.SDK{SAML: &config.SAML{
		EntityID: benchEntity, ACSURL: benchACS, IDPMetadataFile: md, AllowIDPInitiated: allowIDPInitiated,
	}}}
	cfg.SetDefaults()
	is, err := issuer.New(issuer.Options{Issuer: benchEntity, TTL: cfg.SDK.SAML.TokenTTL.Duration})
	if err != nil {
		f.Fatal(err)
	}
	g, err := New(cfg, Deps{Issuer: is, Logger: slog.New(slog.DiscardHandler), Store: acceptAll{}, Getenv: func(string) string { return "" }})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { g.Close() })
	return g, idp
}
