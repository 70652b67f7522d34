package envoy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// oidcConfig is a deployment of tenant acme with browser sign-in through
// [sdk.oidc] and, with tenants, one more provider per tenant.
func oidcConfig(tenants ...string) config.Config {
	var cfg config.Config
	cfg.SDK.TenantID = testTenant
	cfg.Sidecar.Routes = testRoutes
	cfg.SDK.Session.CookieName = "svc_session"
	cfg.SDK.OIDC = &config.OIDC{IssuerURL: "https://op.example", ClientID: "app", PathPrefix: "/auth/oidc",
		RedirectURL: "http://127.0.0.1:8080/auth/oidc/callback"} // plain cookies on loopback
	for _, t := range tenants {
		cfg.SDK.OIDC.Providers = append(cfg.SDK.OIDC.Providers, config.OIDCProvider{Name: t, Tenant: t, IssuerURL: "https://" + t + ".example", ClientID: "app"})
	}
	return cfg
}

// sessionAuthorizer allows every request as a sign-in session expiring
// at exp; without a session cookie it refuses (token-missing).
func sessionAuthorizer(exp time.Time) Authorizer {
	return authorizerFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.Credential.Bearer == "" {
			return engine.Result{Token: engine.TokenDecision{Reason: reason.TokenMissing}}, nil
		}
		return engine.Result{
			Token: engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "ann", TenantID: testTenant, Kind: engine.KindSession,
				Claims: map[string]any{"sub": "ann", "tenant_id": testTenant, "idp": "default", "exp": json.Number(strconv.FormatInt(exp.Unix(), 10))}},
			Decision: engine.Decision{Allow: true, DecisionID: "d-1", Reason: reason.PolicyAllow},
			Input:    req.Input,
		}, nil
	})
}

// fakeRenewal answers RenewSession with cookie, recording the
// Cookie headers it was asked with.
type fakeRenewal struct {
	cookie string

	mu    sync.Mutex
	asked []string
}

func (f *fakeRenewal) RenewSession(_ context.Context, cookies string, claims map[string]any) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if claims["idp"] == nil {
		panic("claims of the session not passed")
	}
	f.asked = append(f.asked, cookies)
	return f.cookie
}

func (f *fakeRenewal) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.asked)
}

const (
	renewedCookie = "svc_session=new.jwt.token; Path=/; Max-Age=900; HttpOnly; SameSite=Lax"
	clearedCookie = "svc_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
	sessionCookie = "svc_session=old.jwt.token; svc_session_rt=handle"
)

// Over gRPC (the go-control-plane client), a session within the window
// is renewed and the new cookie goes to the client in
// response_headers_to_add, beside the upstream's own cookies; one outside
// it is not asked about; one whose renewal was refused keeps its answer
// and has its cookie cleared.
func TestRenewOverGRPC(t *testing.T) {
	browser := map[string]string{"accept": acceptChrome, "cookie": sessionCookie}
	for _, tc := range []struct {
		name    string
		left    time.Duration // until the session expires
		renewal *fakeRenewal
		headers map[string]string
		asked   int
		cookie  string // Set-Cookie to the client
	}{
		{name: "outside the window", left: 10 * time.Minute, renewal: &fakeRenewal{cookie: renewedCookie}, headers: browser},
		{name: "within the window", left: 2 * time.Minute, renewal: &fakeRenewal{cookie: renewedCookie}, headers: browser, asked: 1, cookie: renewedCookie},
		{name: "within the window, refreshing elsewhere", left: 2 * time.Minute, renewal: &fakeRenewal{}, headers: browser, asked: 1},
		// The answer was decided (and audited) with the session valid: it
		// stands, and clears the session so that the browser signs in again.
		{name: "refused: the answer stands, the session is cleared", left: time.Minute, renewal: &fakeRenewal{cookie: clearedCookie}, headers: browser,
			asked: 1, cookie: clearedCookie},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, oidcConfig(), sessionAuthorizer(time.Now().Add(tc.left)))
			s.SetSessionRenewal(tc.renewal, 4*time.Minute)
			client := serveGRPC(t, s)
			resp, err := client.Check(t.Context(), checkReq("GET", "/api/orders/7", tc.headers, nil))
			if err != nil {
				t.Fatal(err)
			}
			if n := tc.renewal.calls(); n != tc.asked {
				t.Fatalf("RenewSession asked %d times, want %d", n, tc.asked)
			}
			if tc.asked > 0 && tc.renewal.asked[0] != sessionCookie {
				t.Errorf("RenewSession got cookies %q", tc.renewal.asked[0])
			}
			ok := resp.GetOkResponse()
			if ok == nil {
				t.Fatalf("denied (%s), want allowed", resp.GetStatus().GetMessage())
			}
			var cookie string
			for _, h := range ok.GetResponseHeadersToAdd() {
				if h.GetHeader().GetKey() == "set-cookie" {
					cookie = h.GetHeader().GetValue()
					if h.GetAppendAction() != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
						t.Errorf("set-cookie with %v, want APPEND_IF_EXISTS_OR_ADD (the upstream's cookies stay)", h.GetAppendAction())
					}
				}
			}
			if cookie != tc.cookie {
				t.Errorf("set-cookie %q, want %q", cookie, tc.cookie)
			}
		})
	}
}

// The HTTP check hands the renewed session to nginx in X-Svc-Set-Cookie
// (which the shipped nginx.conf adds as Set-Cookie) and to Envoy's
// http_service in Set-Cookie; Caddy's forward_auth cannot pass it on, so
// its checks do not renew.
func TestRenewHTTPCheck(t *testing.T) {
	s := newTestServer(t, oidcConfig(), sessionAuthorizer(time.Now().Add(time.Minute)))
	f := &fakeRenewal{cookie: renewedCookie}
	s.SetSessionRenewal(f, 4*time.Minute)
	mux := http.NewServeMux()
	s.RegisterHTTP(mux)
	for _, tc := range []struct {
		name, path string
		headers    map[string]string
		asked      int
		header     string // where the cookie is
	}{
		{name: "nginx", path: "/check", headers: map[string]string{"X-Original-URI": "/api/orders/7", "X_Svc_Method": "GET"}, asked: 1, header: HeaderSetCookie},
		{name: "envoy http_service", path: "/check/envoy/api/orders/7", asked: 1, header: "Set-Cookie"},
		{name: "caddy", path: "/check", headers: map[string]string{"X-Forwarded-Uri": "/api/orders/7", "X-Forwarded-Method": "GET"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.calls()
			r := httptest.NewRequest("GET", tc.path, nil)
			r.Header.Set("Cookie", sessionCookie)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d", rec.Code)
			}
			if n := f.calls() - before; n != tc.asked {
				t.Fatalf("RenewSession asked %d times, want %d", n, tc.asked)
			}
			for _, h := range []string{HeaderSetCookie, "Set-Cookie"} {
				want := ""
				if h == tc.header {
					want = renewedCookie
				}
				if got := rec.Header().Get(h); got != want {
					t.Errorf("%s = %q, want %q", h, got, want)
				}
			}
		})
	}
	// A refused renewal: the answer stands, and nginx gets the cleared
	// cookie with it.
	f.cookie = clearedCookie
	r := httptest.NewRequest("GET", "/check", nil)
	r.Header.Set("Cookie", sessionCookie)
	r.Header.Set("Accept", acceptChrome)
	r.Header.Set("X-Original-URI", "/api/orders/7")
	r.Header.Set("X_Svc_Method", "GET")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, r)
	if rec.Code != http.StatusOK || rec.Header().Get(HeaderLogin) != "" || rec.Header().Get(HeaderSetCookie) != clearedCookie {
		t.Fatalf("refused renewal: %d, login %q, cookie %q", rec.Code, rec.Header().Get(HeaderLogin), rec.Header().Get(HeaderSetCookie))
	}
}

// A session outside its renewal window costs no allocation more than one
// without renewal, and no call.
func TestRenewOutsideWindowAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	az := sessionAuthorizer(time.Now().Add(time.Hour))
	req := checkReq("GET", "/api/orders/7", map[string]string{"cookie": sessionCookie, "accept": "application/json"}, nil)
	plain := newTestServer(t, oidcConfig(), az)
	renewing := newTestServer(t, oidcConfig(), az)
	f := &fakeRenewal{cookie: renewedCookie}
	renewing.SetSessionRenewal(f, 4*time.Minute)
	ctx := context.Background()
	allocs := func(s *Server) float64 {
		return testing.AllocsPerRun(200, func() {
			if a := s.answer(ctx, req); !a.v.allow {
				t.Fatal("not allowed")
			}
		})
	}
	if p, r := allocs(plain), allocs(renewing); r > p {
		t.Errorf("a check with renewal on: %v allocations, without: %v", r, p)
	}
	if f.calls() != 0 {
		t.Errorf("RenewSession asked %d times for a session outside its window", f.calls())
	}
}

// Browser redirects name the request's tenant (the route's {tenant}, the
// svc.tenant context extension, else sdk.tenant_id) when providers are
// per tenant, so the login offers only that tenant's; without tenant
// providers they name none.
func TestLoginRedirectNamesTenant(t *testing.T) {
	az := sessionAuthorizer(time.Now().Add(time.Hour))
	tenanted := newTestServer(t, oidcConfig("globex", "initech"), az)
	single := newTestServer(t, oidcConfig(), az)
	browser := map[string]string{"accept": acceptChrome}
	login := func(q url.Values) string { return "/auth/oidc/login?" + q.Encode() }
	for _, tc := range []struct {
		name string
		s    *Server
		path string
		ext  map[string]string
		want string
	}{
		{name: "route capture", s: tenanted, path: "/t/globex/orders/7", want: login(url.Values{"return_to": {"/t/globex/orders/7"}, "tenant": {"globex"}})},
		{name: "context extension", s: tenanted, path: "/api/orders/7", ext: map[string]string{ExtTenant: "initech"},
			want: login(url.Values{"return_to": {"/api/orders/7"}, "tenant": {"initech"}})},
		{name: "deployment tenant", s: tenanted, path: "/api/orders/7", want: login(url.Values{"return_to": {"/api/orders/7"}, "tenant": {testTenant}})},
		{name: "no tenant providers", s: single, path: "/t/globex/orders/7", want: login(url.Values{"return_to": {"/t/globex/orders/7"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := serveGRPC(t, tc.s).Check(t.Context(), checkReq("GET", tc.path, browser, tc.ext))
			if err != nil {
				t.Fatal(err)
			}
			d := resp.GetDeniedResponse()
			if d.GetStatus().GetCode() != http.StatusFound {
				t.Fatalf("status %d, want 302", d.GetStatus().GetCode())
			}
			for _, h := range d.GetHeaders() {
				if h.GetHeader().GetKey() == "location" && h.GetHeader().GetValue() != tc.want {
					t.Errorf("location %q, want %q", h.GetHeader().GetValue(), tc.want)
				}
			}
		})
	}
	// The HTTP check: nginx's X-Svc-Login and Caddy's Location.
	mux := http.NewServeMux()
	tenanted.RegisterHTTP(mux)
	want := login(url.Values{"return_to": {"/t/globex/orders/7"}, "tenant": {"globex"}})
	for name, h := range map[string]map[string]string{
		HeaderLogin: {"X-Original-URI": "/t/globex/orders/7", "X_Svc_Method": "GET"},
		"Location":  {"X-Forwarded-Uri": "/t/globex/orders/7", "X-Forwarded-Method": "GET"},
	} {
		r := httptest.NewRequest("GET", "/check", nil)
		r.Header.Set("Accept", acceptChrome)
		for k, v := range h {
			r.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		if got := rec.Header().Get(name); got != want {
			t.Errorf("%s = %q (status %d), want %q", name, got, rec.Code, want)
		}
	}
}

var _ authv3.AuthorizationServer = (*Server)(nil)
