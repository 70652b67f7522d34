package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
)

// Session lifetimes of TestOIDCRefreshAcrossReplicas: a session enters
// its refresh window refreshTTL-refreshBefore after it was issued.
const (
	refreshTTL    = 60 * time.Second
	refreshBefore = 50 * time.Second
)

// TestOIDCRefreshAcrossReplicas runs 3 sidecar processes sharing a real
// redis-server against the real OpenID provider (npm oidc-provider,
// offline_access granted): a browser signs in through the shipped
// nginx.conf in front of the first; once its session is in its refresh
// window, 50 concurrent requests of it, spread over the 3 replicas
// (through nginx, the HTTP check, Envoy's gRPC Check), are all allowed
// and cause exactly one refresh token request at the provider; the
// renewed session reaches the browser (Set-Cookie through nginx,
// X-Svc-Set-Cookie from the HTTP check, response_headers_to_add over
// gRPC) and is accepted by every replica.
func TestOIDCRefreshAcrossReplicas(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	redisAddr := redistest.Start(t)
	root := harness.ModuleRoot(t)
	front := harness.FreeAddr(t)
	callback := "http://" + front + "/auth/oidc/callback"
	client := harness.IDPClient{ID: "orders-web", Secret: "web-secret-0123456789abcdef", TenantID: "acme",
		Roles: []string{"viewer"}, Email: "ann@acme.example", RedirectURIs: []string{callback}}
	idp := harness.StartIDP(t, idpResource, 5*time.Minute, client)
	secret := harness.WriteFile(t, t.TempDir(), "client-secret", client.Secret+"\n")
	tokenKey := testkit.TokenKeyFile(t)
	var replicas []*harness.Sidecar
	var signins []string
	for range 3 {
		signin := harness.FreeAddr(t)
		replicas = append(replicas, startSidecar(t, k, map[string]string{
			"SVC_SIGNIN_ADDR":                    signin,
			"SVC_REDIS_ADDR":                     redisAddr,
			"SVC_OIDC_ISSUER_URL":                idp.Issuer,
			"SVC_OIDC_CLIENT_ID":                 client.ID,
			"SVC_OIDC_CLIENT_SECRET_FILE":        secret,
			"SVC_OIDC_REDIRECT_URL":              callback,
			"SVC_OIDC_SCOPES":                    "openid,email,offline_access",
			"SVC_SESSION_TOKEN_TTL":              refreshTTL.String(),
			"SVC_SESSION_REFRESH_BEFORE":         refreshBefore.String(),
			"SVC_SESSION_TOKEN_SIGNING_KEY_FILE": tokenKey,
		}))
		signins = append(signins, signin)
	}
	up := harness.StartUpstream(t)
	nginx := shippedProxies[0]
	base := startShippedProxyOn(t, front, nginx.bin, filepath.Join(root, nginx.file), nginx.args, map[string]string{
		"127.0.0.1:7700": replicas[0].HTTPAddr, "127.0.0.1:7701": signins[0], "127.0.0.1:5678": up.Addr,
	})

	// Sign in through nginx: the page, the login, the provider, back.
	b := newBrowser()
	resp, _, seen := followBrowser(t, b, base+"/orders/1")
	issued := time.Now()
	if u := seen[len(seen)-1]; resp.StatusCode != http.StatusOK || u != base+"/orders/1" {
		t.Fatalf("sign-in ended with %d at %s", resp.StatusCode, u)
	}
	jar := map[string]string{}
	for _, c := range b.Jar.Cookies(&url.URL{Scheme: "http", Host: front, Path: "/"}) {
		jar[c.Name] = c.Value
	}
	if jar["svc_session"] == "" || jar["svc_session_rt"] == "" {
		t.Fatalf("after the sign-in the browser holds %v, want the session and refresh cookies", jar)
	}
	if g := idp.Grants(t); g["authorization_code"].Success != 1 || g["refresh_token"] != (harness.GrantCount{}) {
		t.Fatalf("provider grants after the sign-in: %+v", g)
	}

	// check asks replica i%3 about a request of the session: through
	// nginx for the first, the HTTP check (nginx's convention) of the
	// second, Envoy's gRPC Check of the third. It returns the status, the
	// renewed session's Set-Cookie value if any, and the user the
	// upstream (or the check) names.
	grpcClient := authv3.NewAuthorizationClient(replicas[2].Conn(t))
	check := func(i int, session string) (int, string, string, error) {
		cookies := "svc_session=" + session + "; svc_session_rt=" + jar["svc_session_rt"]
		path := fmt.Sprintf("/orders/%d", i)
		if i%3 == 2 {
			return grpcCheck(grpcClient, path, cookies)
		}
		var req *http.Request
		if i%3 == 0 {
			req, _ = http.NewRequest(http.MethodGet, base+path, nil)
		} else {
			req, _ = http.NewRequest(http.MethodGet, "http://"+replicas[i%3].HTTPAddr+"/check", nil)
			req.Header.Set("X-Original-URI", path)
			req.Header.Set("X_Svc_Method", http.MethodGet)
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Cookie", cookies)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", "", err
		}
		body, _ := readBody(resp)
		resp.Body.Close()
		setCookie, user := resp.Header.Get("X-Svc-Set-Cookie"), resp.Header.Get("X-Svc-User-Id")
		if i%3 == 0 {
			if resp.Header.Get("X-Svc-Set-Cookie") != "" {
				return 0, "", "", fmt.Errorf("nginx let X-Svc-Set-Cookie through")
			}
			setCookie = resp.Header.Get("Set-Cookie")
			var echo harness.Echo
			if resp.StatusCode == http.StatusOK && json.Unmarshal([]byte(body), &echo) == nil {
				user = strings.Join(echo.Headers["X-Svc-User-Id"], ",")
			}
		}
		return resp.StatusCode, setCookie, user, nil
	}
	renewedOf := func(setCookie string) string {
		if setCookie == "" {
			return ""
		}
		c, err := http.ParseSetCookie(setCookie)
		if err != nil || c.Name != "svc_session" || !c.HttpOnly || c.Path != "/" {
			t.Errorf("Set-Cookie %q (%v), want the HttpOnly svc_session at /", setCookie, err)
			return ""
		}
		return c.Value
	}

	// Outside the window: allowed, nothing renewed.
	for i := range 3 {
		status, setCookie, _, err := check(i, jar["svc_session"])
		if err != nil || status != http.StatusOK || setCookie != "" {
			t.Fatalf("replica %d outside the window: %d %q %v", i, status, setCookie, err)
		}
	}
	time.Sleep(time.Until(issued.Add(refreshTTL - refreshBefore + time.Second)))

	// 50 concurrent requests in the window, over the 3 replicas.
	var wg sync.WaitGroup
	var mu sync.Mutex
	renewed := map[string]int{}
	for i := range 50 {
		wg.Go(func() {
			status, setCookie, _, err := check(i, jar["svc_session"])
			if err != nil || status != http.StatusOK {
				t.Errorf("request %d in the window: %d %v, want 200", i, status, err)
				return
			}
			if tok := renewedOf(setCookie); tok != "" {
				mu.Lock()
				renewed[tok]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(renewed) > 1 {
		t.Errorf("%d different renewed sessions were handed out, want one", len(renewed))
	}
	session := ""
	for tok := range renewed {
		session = tok
	}
	// A refresh slower than the check's wait reaches a later request.
	for i := 0; session == "" && time.Since(issued) < refreshTTL-10*time.Second; i++ {
		_, setCookie, _, err := check(i, jar["svc_session"])
		if err != nil {
			t.Fatal(err)
		}
		session = renewedOf(setCookie)
		time.Sleep(100 * time.Millisecond)
	}
	if session == "" || session == jar["svc_session"] {
		t.Fatal("no request of the session got the renewed one")
	}
	if g := idp.Grants(t); g["refresh_token"] != (harness.GrantCount{Success: 1}) {
		t.Fatalf("refresh token requests at the provider: %+v, want exactly one, granted", g["refresh_token"])
	}

	// The renewed session works on every replica, and is outside its own
	// window: nothing more is renewed.
	for i := range 6 {
		status, setCookie, user, err := check(i, session)
		if err != nil || status != http.StatusOK || setCookie != "" || user != client.ID {
			t.Errorf("renewed session on replica %d: %d, Set-Cookie %q, user %q, %v; want 200 for %s", i%3, status, setCookie, user, err, client.ID)
		}
	}
	if g := idp.Grants(t); g["refresh_token"] != (harness.GrantCount{Success: 1}) {
		t.Errorf("refresh token requests at the provider: %+v, want still one", g["refresh_token"])
	}
}

// TestOIDCTenantSignInThroughShippedProxies: with one provider per
// tenant, a browser without a session at a tenant's page is sent, through
// the shipped nginx.conf and Caddyfile, to that tenant's sign-in
// (?tenant= from the route's {tenant}), which goes straight to the
// tenant's client at the real provider, and comes back signed in as that
// tenant: allowed at the deployment's own tenant (acme), refused by the
// policy's tenant isolation as globex.
func TestOIDCTenantSignInThroughShippedProxies(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	root := harness.ModuleRoot(t)
	for _, px := range shippedProxies {
		t.Run(px.name, func(t *testing.T) {
			front := harness.FreeAddr(t)
			callback := "http://" + front + "/auth/oidc/callback"
			var clients []harness.IDPClient
			for _, tenant := range []string{"acme", "globex"} {
				clients = append(clients, harness.IDPClient{ID: tenant + "-web", Secret: "secret-of-" + tenant + "-0123456789",
					TenantID: tenant, Roles: []string{"viewer"}, RedirectURIs: []string{callback}})
			}
			idp := harness.StartIDP(t, idpResource, 5*time.Minute, clients...)
			dir := t.TempDir()
			conf := sidecarConfig + `
[[sidecar.routes]]
path = "/t/{tenant}/{resource}/{id}"

[sdk.oidc]
redirect_url = "` + callback + `"
`
			for _, c := range clients {
				conf += fmt.Sprintf("\n[[sdk.oidc.providers]]\nname = %q\ntenant = %q\nissuer_url = %q\nclient_id = %q\nclient_secret_file = %q\n",
					c.TenantID, c.TenantID, idp.Issuer, c.ID, harness.WriteFile(t, dir, c.ID+"-secret", c.Secret+"\n"))
			}
			signin := harness.FreeAddr(t)
			s := harness.StartSidecar(t, harness.SidecarOptions{Config: conf, Env: map[string]string{
				"SVC_JWKS_URL": k.jwks.URL, "SVC_SIGNIN_ADDR": signin}})
			up := harness.StartUpstream(t)
			base := startShippedProxyOn(t, front, px.bin, filepath.Join(root, px.file), px.args, map[string]string{
				"127.0.0.1:7700": s.HTTPAddr, "127.0.0.1:7701": signin, "127.0.0.1:5678": up.Addr,
			})
			// The deployment is acme's: a globex session is refused by the
			// policy's tenant isolation, after signing in as globex.
			for tenant, status := range map[string]int{"acme": http.StatusOK, "globex": http.StatusForbidden} {
				b := newBrowser()
				page := "/t/" + tenant + "/orders/7"
				resp, body, seen := followBrowser(t, b, base+page)
				u := seen[len(seen)-1]
				want := base + "/auth/oidc/login?" + url.Values{"return_to": {page}, "tenant": {tenant}}.Encode()
				if len(seen) < 3 || seen[1] != want || !strings.HasPrefix(seen[2], idp.Issuer) || !strings.Contains(seen[2], "client_id="+tenant+"-web") {
					t.Fatalf("%s: the sign-in went %v, want %s, then %s's client at the provider", tenant, seen, want, tenant)
				}
				if resp.StatusCode != status || u != base+page {
					t.Fatalf("%s: sign-in ended with %s at %s, want %d", tenant, harness.Describe(resp.StatusCode, resp.Header, []byte(body)), u, status)
				}
				if status != http.StatusOK {
					continue
				}
				echo := harness.ParseEcho(t, []byte(body))
				if got := strings.Join(echo.Headers["X-Svc-Tenant-Id"], ","); got != tenant {
					t.Errorf("the upstream saw tenant %q, want %s", got, tenant)
				}
			}
		})
	}
}

// followBrowser walks redirects from u in browser b until the first
// answer that is not one; it returns that answer, its body and the URLs
// passed through, u first.
func followBrowser(t *testing.T, b *http.Client, u string) (*http.Response, string, []string) {
	t.Helper()
	var seen []string
	for range 20 {
		seen = append(seen, u)
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Accept", browserAccept)
		resp, raw := testkit.Do(t, b, req)
		body := string(raw)
		if resp.StatusCode < 300 || resp.StatusCode > 399 {
			return resp, body, seen
		}
		next, err := resp.Request.URL.Parse(resp.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		u = next.String()
	}
	t.Fatalf("too many redirects: %v", seen)
	return nil, "", nil
}

// grpcCheck is an Envoy ext_authz Check of GET path with cookies: the
// status, the Set-Cookie the answer adds to the client's response
// (response_headers_to_add, which must append), and the upstream user.
func grpcCheck(c authv3.AuthorizationClient, path, cookies string) (int, string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := c.Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: http.MethodGet, Path: path, Host: "shop.example", Scheme: "http",
			Headers: map[string]string{"accept": "application/json", "cookie": cookies},
		}},
	}})
	if err != nil {
		return 0, "", "", err
	}
	ok := resp.GetOkResponse()
	if ok == nil {
		return int(resp.GetDeniedResponse().GetStatus().GetCode()), "", "", nil
	}
	var setCookie, user string
	for _, h := range ok.GetResponseHeadersToAdd() {
		if h.GetHeader().GetKey() == "set-cookie" {
			if h.GetAppendAction() != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
				return 0, "", "", fmt.Errorf("set-cookie with %v, want it appended", h.GetAppendAction())
			}
			setCookie = h.GetHeader().GetValue()
		}
	}
	for _, h := range ok.GetHeaders() {
		if h.GetHeader().GetKey() == "x-svc-user-id" {
			user = h.GetHeader().GetValue()
		}
	}
	return http.StatusOK, setCookie, user, nil
}
