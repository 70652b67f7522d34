package envoy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/clientcert"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
)

// recordingAuthorizer keeps the last request it was asked to decide and
// refuses it as token-missing.
type recordingAuthorizer struct {
	mu   sync.Mutex
	last engine.Request
}

func (a *recordingAuthorizer) Decide(_ context.Context, req engine.Request) (engine.Result, error) {
	if req.Completer != nil {
		req.Completer.CompleteRequest(req.Input.Request)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last = req
	return engine.Result{Token: engine.TokenDecision{Reason: reason.TokenMissing}}, nil
}

func (a *recordingAuthorizer) request() engine.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

const xfcc = "By=spiffe://acme.example/nginx;URI=spiffe://acme.example/ns/shop/sa/orders"

// Envoy's Check carries the source peer's principal and certificate: they
// go to the engine as the client certificate, beside any other
// credential; an X-Forwarded-Client-Cert header among the request's
// headers is neither read nor shown to the policy.
func TestCheckClientCert(t *testing.T) {
	az := &recordingAuthorizer{}
	client := serveGRPC(t, newTestServer(t, config.Config{}, az))
	tests := []struct {
		name      string
		principal string
		cert      string
		headers   map[string]string
		want      engine.Credential
	}{
		{"principal", "spiffe://acme.example/ns/shop/sa/orders", "", nil,
			engine.Credential{ClientCert: clientcert.Presented{Principal: "spiffe://acme.example/ns/shop/sa/orders"}}},
		{"principal and certificate", "spiffe://acme.example/x", "-----BEGIN%20CERTIFICATE-----%0A", nil,
			engine.Credential{ClientCert: clientcert.Presented{Principal: "spiffe://acme.example/x", Certificate: "-----BEGIN%20CERTIFICATE-----%0A"}}},
		{"with a bearer token", "spiffe://acme.example/x", "", map[string]string{"authorization": "Bearer tok"},
			engine.Credential{Bearer: "tok", ClientCert: clientcert.Presented{Principal: "spiffe://acme.example/x"}}},
		{"xfcc header of a client", "", "", map[string]string{"x-forwarded-client-cert": xfcc}, engine.Credential{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := map[string]string{"x-tag": "kept"}
			for k, v := range tt.headers {
				h[k] = v
			}
			req := checkReq("GET", "/orders/1", h, nil)
			req.Attributes.Source = &authv3.AttributeContext_Peer{Principal: tt.principal, Certificate: tt.cert}
			if _, err := client.Check(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			got := az.request()
			if diff := cmp.Diff(tt.want, got.Credential); diff != "" {
				t.Errorf("credential (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(map[string]string{"x-tag": "kept"}, got.Input.Request.Headers); diff != "" {
				t.Errorf("input.request.headers (-want +got):\n%s", diff)
			}
		})
	}
}

// An HTTP check reads X-Forwarded-Client-Cert only from a peer of
// sidecar.trusted_proxies, and never shows it to the policy.
func TestHTTPCheckClientCertTrust(t *testing.T) {
	cfg := config.Config{}
	cfg.Sidecar.TrustedProxies = []string{"10.0.0.0/8", "::1"}
	az := &recordingAuthorizer{}
	mux := http.NewServeMux()
	newTestServer(t, cfg, az).RegisterHTTP(mux)
	nginx := map[string]string{"X-Original-URI": "/orders/1", HeaderNginxMethod: "GET"}
	tests := []struct {
		name, peer, path string
		headers          map[string]string
		want             clientcert.Presented
	}{
		{"nginx from a trusted proxy", "10.1.2.3:5000", CheckPath, nginx, clientcert.Presented{XFCC: xfcc}},
		{"nginx from a trusted IPv6 proxy", "[::1]:5000", CheckPath, nginx, clientcert.Presented{XFCC: xfcc}},
		{"envoy http_service from a trusted proxy", "10.1.2.3:5000", EnvoyCheckPrefix + "/orders/1", nil, clientcert.Presented{XFCC: xfcc}},
		{"nginx from another peer", "192.0.2.1:5000", CheckPath, nginx, clientcert.Presented{}},
		{"envoy http_service from another peer", "192.0.2.1:5000", EnvoyCheckPrefix + "/orders/1", nil, clientcert.Presented{}},
		{"from a unix socket", "@", CheckPath, nginx, clientcert.Presented{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tt.path, nil)
			r.RemoteAddr = tt.peer
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			r.Header.Set("X-Forwarded-Client-Cert", xfcc)
			r.Header.Set("X-Tag", "kept")
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			if w.Code != http.StatusUnauthorized {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			got := az.request()
			if got.Credential.ClientCert != tt.want {
				t.Errorf("client cert = %+v, want %+v", got.Credential.ClientCert, tt.want)
			}
			if _, ok := got.Input.Request.Headers["x-forwarded-client-cert"]; ok {
				t.Errorf("x-forwarded-client-cert reached input.request.headers: %v", got.Input.Request.Headers)
			}
		})
	}
	// Without trusted proxies, no peer's header counts.
	az2 := &recordingAuthorizer{}
	mux2 := http.NewServeMux()
	newTestServer(t, config.Config{}, az2).RegisterHTTP(mux2)
	r := httptest.NewRequest("GET", CheckPath, nil)
	r.RemoteAddr = "127.0.0.1:5000"
	for k, v := range nginx {
		r.Header.Set(k, v)
	}
	r.Header.Set("X-Forwarded-Client-Cert", xfcc)
	mux2.ServeHTTP(httptest.NewRecorder(), r)
	if got := az2.request().Credential.ClientCert; !got.IsZero() {
		t.Fatalf("client cert without trusted proxies = %+v", got)
	}
}
