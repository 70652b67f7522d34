package e2e

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/nginxconf"
	"github.com/svc-dev/svc/internal/testkit"
)

// The workloads of the client-certificate tests: orders is a viewer of
// tenant acme, billing of acme without roles, and intruder of a trust
// domain the sidecar does not map.
const (
	ordersID   = "spiffe://acme.example/ns/shop/sa/orders"
	billingID  = "spiffe://acme.example/ns/shop/sa/billing"
	intruderID = "spiffe://evil.example/ns/shop/sa/orders"
)

// clientCertConfig makes client certificates the sidecar's only identity
// source; proxies are the peers whose X-Forwarded-Client-Cert counts.
func clientCertConfig(proxies string) string {
	return sidecarConfig + `
[client_certs.trust_domains]
"acme.example" = "acme"

[client_certs.roles]
"` + ordersID + `" = ["viewer"]

[sidecar]
trusted_proxies = [` + proxies + `]
`
}

// envoyEscape URL-encodes a PEM certificate as Envoy writes
// attributes.source.certificate and the Cert of X-Forwarded-Client-Cert.
func envoyEscape(pem []byte) string {
	return strings.NewReplacer("\n", "%0A", " ", "%20", "+", "%2B", "/", "%2F", "=", "%3D").Replace(string(pem))
}

// certCheck sends an ext_authz Check as Envoy does for a request on a
// listener that verified the client's certificate: the source peer
// carries the principal (the certificate's URI SAN) and the
// certificate.
func certCheck(t *testing.T, s *harness.Sidecar, method, path, principal, cert string, headers map[string]string) checkResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "10.0.0.7", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}}}},
			Principal:   principal,
			Certificate: cert,
		},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: "req-1", Method: method, Path: path, Host: "api.example.test", Scheme: "https", Protocol: "HTTP/2", Headers: headers,
		}},
		TlsSession: &authv3.AttributeContext_TLSSession{Sni: "api.example.test"},
	}}
	resp, err := authv3.NewAuthorizationClient(s.Conn(t)).Check(ctx, req)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	r := checkResult{headers: map[string]string{}}
	if resp.GetStatus().GetCode() == int32(code.Code_OK) {
		r.status = http.StatusOK
		addHeaders(r.headers, resp.GetOkResponse().GetHeaders())
		return r
	}
	r.status = int(resp.GetDeniedResponse().GetStatus().GetCode())
	r.body = resp.GetDeniedResponse().GetBody()
	return r
}

// Envoy-shaped Check requests with real X.509-SVIDs: the SPIFFE ID is
// the caller, of its trust domain's tenant, with its roles; a bearer
// token is judged before the certificate; an unmapped trust domain and a
// principal that the certificate contradicts are refused with their
// reasons.
func TestClientCertsEnvoyCheck(t *testing.T) {
	ca := testkit.NewCA(t, "mesh CA")
	orders := envoyEscape(ca.Client(t, ordersID).CertPEM)
	billing := envoyEscape(ca.Client(t, billingID).CertPEM)
	intruder := envoyEscape(ca.Client(t, intruderID).CertPEM)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: clientCertConfig("")})
	st := getStatus(t, s)
	if st.DevMode || st.ClientCerts == nil || st.ClientCerts.TrustDomains != 1 || st.ClientCerts.Roles != 1 {
		t.Fatalf("status: dev mode %v, client certs %+v; want one trust domain, one ID with roles", st.DevMode, st.ClientCerts)
	}

	r := certCheck(t, s, "GET", "/orders/1", ordersID, orders, nil)
	if r.status != http.StatusOK || r.headers["x-svc-user-id"] != ordersID || r.headers["x-svc-tenant-id"] != "acme" || r.headers["x-svc-roles"] != "viewer" {
		t.Fatalf("orders reading: status %d, headers %v, body %s; want 200 as %s of acme, viewer", r.status, r.headers, r.body, ordersID)
	}
	tests := []struct {
		name, method, principal, cert string
		headers                       map[string]string
		status                        int
		reason                        string
	}{
		{"the principal alone", "GET", ordersID, "", nil, http.StatusOK, ""},
		{"a viewer deleting", "DELETE", ordersID, orders, nil, http.StatusForbidden, "policy-deny"},
		{"an ID without roles", "GET", billingID, billing, nil, http.StatusForbidden, "policy-deny"},
		{"an unmapped trust domain", "GET", intruderID, intruder, nil, http.StatusUnauthorized, "client-cert-untrusted"},
		{"a principal the certificate contradicts", "GET", ordersID, billing, nil, http.StatusUnauthorized, "client-cert-invalid"},
		{"a certificate that does not decode", "GET", ordersID, "-----BEGIN%20CERTIFICATE-----%0AAAAA%0A-----END%20CERTIFICATE-----%0A", nil, http.StatusUnauthorized, "client-cert-invalid"},
		{"a subject without a SPIFFE ID", "GET", "CN=orders", "", nil, http.StatusUnauthorized, "client-cert-invalid"},
		{"a bearer token first", "GET", ordersID, orders, map[string]string{"authorization": "Bearer eyJhbGciOiJFUzI1NiJ9.e30.c2ln"}, http.StatusUnauthorized, "issuer-unknown"},
		{"an XFCC header in the request", "GET", "", "", map[string]string{"x-forwarded-client-cert": "URI=" + ordersID}, http.StatusUnauthorized, "token-missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := certCheck(t, s, tt.method, "/orders/1", tt.principal, tt.cert, tt.headers)
			if r.status != tt.status || (tt.reason != "" && denyReason(r.body) != tt.reason) {
				t.Fatalf("status %d, body %s; want %d %s", r.status, r.body, tt.status, tt.reason)
			}
		})
	}
	st = getStatus(t, s)
	if c := st.ClientCerts; c.Accepted != 4 || c.Untrusted != 1 || c.Invalid != 3 {
		t.Errorf("status client_certs %+v; want 4 accepted, 1 untrusted, 3 invalid", c)
	}
	_, _, metrics := harness.Get(t, s.URL("/metrics"))
	for outcome, n := range map[string]string{"ok": "4", "client-cert-untrusted": "1", "client-cert-invalid": "3"} {
		re := regexp.MustCompile(`(?m)^svc_client_certs_verifications_total\{[^}]*outcome="` + outcome + `"[^}]*\} ` + n + `$`)
		if !re.Match(metrics) {
			t.Errorf("/metrics lacks svc_client_certs_verifications_total{outcome=%q} %s", outcome, n)
		}
	}
}

// nginxMTLSServer is an nginx server block that requires a client
// certificate signed by the CA (ssl_verify_client on) and passes it to the
// sidecar's check in X-Forwarded-Client-Cert, as docs/client-certs.md
// shows.
// mtlsFiles writes, into a directory of its own, what nginxMTLSServer
// reads: the CA of ca (ca.pem) and a server certificate it issued
// (server.pem, server.key).
func mtlsFiles(t *testing.T, ca *testkit.CA) string {
	t.Helper()
	server := ca.Server(t)
	dir := t.TempDir()
	harness.WriteFile(t, dir, "ca.pem", string(ca.PEM))
	harness.WriteFile(t, dir, "server.pem", string(server.CertPEM))
	harness.WriteFile(t, dir, "server.key", string(server.KeyPEM))
	return dir
}

func nginxMTLSServer(dir, addr, sidecarHTTP, upstream string) string {
	return `
    server {
        listen ` + addr + ` ssl;
        ssl_certificate ` + dir + `/server.pem;
        ssl_certificate_key ` + dir + `/server.key;
        ssl_client_certificate ` + dir + `/ca.pem;
        ssl_verify_client on;

        location = /_svc_check {
            internal;
            proxy_pass http://` + sidecarHTTP + `/check;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI $request_uri;
            proxy_set_header X_Svc_Method $request_method;
            proxy_set_header X-Forwarded-Client-Cert 'Cert="$ssl_client_escaped_cert"';
        }

        location / {
            auth_request /_svc_check;
            auth_request_set $svc_user_id $upstream_http_x_svc_user_id;
            auth_request_set $svc_tenant_id $upstream_http_x_svc_tenant_id;
            auth_request_set $svc_roles $upstream_http_x_svc_roles;
            proxy_set_header X-Svc-User-Id $svc_user_id;
            proxy_set_header X-Svc-Tenant-Id $svc_tenant_id;
            proxy_set_header X-Svc-Roles $svc_roles;
            proxy_pass http://` + upstream + `;
        }
    }`
}

// Debian's nginx verifies the client's certificate and hands it to the
// sidecar in X-Forwarded-Client-Cert: the workload is let through as its
// SPIFFE ID, and the header a client writes itself changes nothing. The
// same header sent to the sidecar straight from a peer that is not in
// sidecar.trusted_proxies authenticates nobody, and a malformed one from
// a trusted peer is refused with client-cert-invalid.
func TestClientCertsNginx(t *testing.T) {
	ca := testkit.NewCA(t, "mesh CA")
	orders, intruder := ca.Client(t, ordersID), ca.Client(t, intruderID)
	up := harness.StartUpstream(t)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: clientCertConfig(`"127.0.0.1"`)})
	dir := mtlsFiles(t, ca)
	nginx := harness.StartNginxServer(t, func(addr string) string { return nginxMTLSServer(dir, addr, s.HTTPAddr, up.Addr) })
	base := "https://" + strings.TrimPrefix(nginx.URL, "http://")

	roots := ca.Pool()
	client := func(id testkit.Issued) *http.Client {
		cfg := &tls.Config{RootCAs: roots}
		if id.CertPEM != nil {
			pair, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	get := func(c *http.Client, method, path string, header map[string]string) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, body := testkit.Do(t, c, req)
		return resp.StatusCode, resp.Header, body
	}

	status, h, body := get(client(orders), "GET", "/orders/1", map[string]string{"X-Forwarded-Client-Cert": "URI=" + billingID})
	if status != http.StatusOK || h.Get("X-Upstream") != "echo" {
		t.Fatalf("orders through nginx: %s", harness.Describe(status, h, body))
	}
	echo := harness.ParseEcho(t, body)
	if got := echo.Header("X-Svc-User-Id"); len(got) != 1 || got[0] != ordersID {
		t.Errorf("upstream saw X-Svc-User-Id %q, want %s (the certificate, not the client's header)", got, ordersID)
	}
	if got := echo.Header("X-Svc-Roles"); len(got) != 1 || got[0] != "viewer" {
		t.Errorf("upstream saw X-Svc-Roles %q, want viewer", got)
	}
	if status, h, body := get(client(orders), "DELETE", "/orders/1", nil); status != http.StatusForbidden {
		t.Errorf("orders deleting through nginx: %s; want 403", harness.Describe(status, h, body))
	}
	if status, h, body := get(client(intruder), "GET", "/orders/1", nil); status != http.StatusUnauthorized {
		t.Errorf("intruder through nginx: %s; want 401", harness.Describe(status, h, body))
	}
	// nginx refuses a client without a certificate before any check.
	if status, _, _ := get(client(testkit.Issued{}), "GET", "/orders/1", nil); status != http.StatusBadRequest {
		t.Errorf("no certificate through nginx: status %d, want nginx's 400", status)
	}
	if up.Hits() != 1 {
		t.Errorf("the upstream saw %d requests, want 1", up.Hits())
	}

	// Straight to the sidecar from 127.0.0.2, a peer that is not listed.
	untrusted := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	direct := func(c *http.Client, xfcc string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("GET", s.URL("/check"), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Original-URI", "/orders/1")
		req.Header.Set("X_Svc_Method", "GET")
		req.Header.Set("X-Forwarded-Client-Cert", xfcc)
		resp, body := testkit.Do(t, c, req)
		return resp.StatusCode, denyReason(string(body))
	}
	good := `Cert="` + envoyEscape(orders.CertPEM) + `"`
	if status, rc := direct(untrusted, good); status != http.StatusUnauthorized || rc != "token-missing" {
		t.Errorf("XFCC from an untrusted peer: %d %s; want 401 token-missing (the header ignored)", status, rc)
	}
	if status, rc := direct(http.DefaultClient, good); status != http.StatusOK {
		t.Errorf("XFCC from the trusted peer: %d %s; want 200", status, rc)
	}
	for name, bad := range map[string]string{
		"unterminated quote": `Cert="` + envoyEscape(orders.CertPEM),
		"empty element":      `URI=` + ordersID + `,,URI=` + ordersID,
		"not a SPIFFE ID":    `URI=https://acme.example/orders`,
	} {
		if status, rc := direct(http.DefaultClient, bad); status != http.StatusUnauthorized || rc != "client-cert-invalid" {
			t.Errorf("%s from the trusted peer: %d %s; want 401 client-cert-invalid", name, status, rc)
		}
	}
	if status, rc := direct(http.DefaultClient, "URI="+intruderID); status != http.StatusUnauthorized || rc != "client-cert-untrusted" {
		t.Errorf("an unmapped trust domain from the trusted peer: %d %s; want 401 client-cert-untrusted", status, rc)
	}
}

// TestClientCertsForgedThroughShippedProxies: the shipped nginx and Caddy
// configurations pass a client's headers to the check, and the proxy is
// listed in sidecar.trusted_proxies (as they ask, for the sign-in
// budgets). A client that writes its own X-Forwarded-Client-Cert must
// still be nobody: each configuration drops that header from the check,
// so the request is refused 401 and never reaches the application.
func TestClientCertsForgedThroughShippedProxies(t *testing.T) {
	t.Parallel()
	root := harness.ModuleRoot(t)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: clientCertConfig(`"127.0.0.1"`)})
	for _, px := range shippedProxies {
		t.Run(px.name, func(t *testing.T) {
			up := harness.StartUpstream(t)
			front := startShippedProxy(t, px.bin, filepath.Join(root, px.file), px.args, map[string]string{
				"127.0.0.1:7700": s.HTTPAddr, "127.0.0.1:7701": harness.FreeAddr(t), "127.0.0.1:5678": up.Addr,
			})
			for _, xfcc := range []string{"URI=" + ordersID, `By=spiffe://acme.example/ns/shop/sa/app;URI=` + ordersID} {
				hits := up.Hits()
				req, err := http.NewRequest(http.MethodGet, front+"/orders/1", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Forwarded-Client-Cert", xfcc)
				status, h, body := harness.Do(t, req)
				if status != http.StatusUnauthorized {
					t.Errorf("a client's X-Forwarded-Client-Cert %q through the shipped %s: %s, want 401",
						xfcc, px.name, harness.Describe(status, h, body))
				}
				if up.Hits() != hits {
					t.Errorf("the request with a forged certificate header reached the application")
				}
			}
		})
	}
}

// TestClientCertsNginxOptionalNoCA: with ssl_verify_client optional_no_ca
// Debian's nginx lets a certificate that no trusted CA signed through;
// passed on unconditionally, it names whatever workload its maker chose,
// and core config validate counts that configuration as an error. Passed
// on only when $ssl_client_verify is SUCCESS, as docs/client-certs.md
// shows, a forged certificate authenticates nobody while the mesh's own
// still does.
func TestClientCertsNginxOptionalNoCA(t *testing.T) {
	ca, rogue := testkit.NewCA(t, "mesh CA"), testkit.NewCA(t, "rogue CA")
	orders, forged := ca.Client(t, ordersID), rogue.Client(t, ordersID)
	up := harness.StartUpstream(t)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: clientCertConfig(`"127.0.0.1"`)})
	dir := mtlsFiles(t, ca)
	const passOn = `proxy_set_header X-Forwarded-Client-Cert 'Cert="$ssl_client_escaped_cert"';`
	noCA := func(addr string) string {
		return strings.Replace(nginxMTLSServer(dir, addr, s.HTTPAddr, up.Addr), "ssl_verify_client on;", "ssl_verify_client optional_no_ca;", 1)
	}
	verifiedOnly := func(addr string) string {
		return `
    map $ssl_client_verify $svc_client_cert {
        SUCCESS 'Cert="$ssl_client_escaped_cert"';
        default "";
    }` + strings.Replace(noCA(addr), passOn, `proxy_set_header X-Forwarded-Client-Cert $svc_client_cert;`, 1)
	}
	// The client sends its certificate whatever CAs nginx names.
	client := func(id testkit.Issued) *http.Client {
		pair, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &tls.Config{RootCAs: ca.Pool(), GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	get := func(base string, id testkit.Issued) (int, http.Header, []byte) {
		t.Helper()
		req, err := http.NewRequest("GET", base+"/orders/1", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, body := testkit.Do(t, client(id), req)
		return resp.StatusCode, resp.Header, body
	}
	sc := nginxconf.Sidecar{ReadsClientCert: true}

	unchecked := harness.StartNginxServer(t, noCA)
	if status, h, body := get("https://"+strings.TrimPrefix(unchecked.URL, "http://"), forged); status != http.StatusOK {
		t.Fatalf("a forged certificate through optional_no_ca, passed on unchecked: %s; want 200, the forgery the lint refuses this configuration for", harness.Describe(status, h, body))
	}
	if fs := nginxconf.Lint([]byte(noCA("127.0.0.1:8443")), sc); len(fs) != 1 || fs[0].Directive != "ssl_verify_client" {
		t.Errorf("lint of optional_no_ca passing the certificate on unchecked: %v, want one ssl_verify_client finding", fs)
	}

	checked := harness.StartNginxServer(t, verifiedOnly)
	base := "https://" + strings.TrimPrefix(checked.URL, "http://")
	if status, h, body := get(base, forged); status != http.StatusUnauthorized {
		t.Errorf("a forged certificate through optional_no_ca, passed on when verified: %s; want 401", harness.Describe(status, h, body))
	}
	if status, h, body := get(base, orders); status != http.StatusOK {
		t.Errorf("orders through optional_no_ca, passed on when verified: %s; want 200", harness.Describe(status, h, body))
	}
	if fs := nginxconf.Lint([]byte(verifiedOnly("127.0.0.1:8443")), sc); len(fs) != 0 {
		t.Errorf("lint of optional_no_ca passing only a verified certificate on: %v, want none", fs)
	}
}
