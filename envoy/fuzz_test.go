package envoy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// loadCheckRequests reads testdata/checkrequests/*.json: CheckRequests as
// Envoy sends them, in protojson.
func loadCheckRequests(t testing.TB) map[string]*authv3.CheckRequest {
	t.Helper()
	out := map[string]*authv3.CheckRequest{}
	for _, f := range testkit.ReadGlob(t, filepath.Join("testdata", "checkrequests", "*.json")) {
		var r authv3.CheckRequest
		if err := protojson.Unmarshal(f.Data, &r); err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		out[strings.TrimSuffix(filepath.Base(f.Path), ".json")] = &r
	}
	return out
}

// TestCheckRequestGolden maps each recorded CheckRequest and compares the
// token and input (or the error) with testdata/checkrequests/*.golden.
func TestCheckRequestGolden(t *testing.T) {
	m, err := NewMapper(testTenant, testRoutes)
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range loadCheckRequests(t) {
		t.Run(name, func(t *testing.T) {
			cred, in, err := m.FromCheckRequest(r)
			var out any
			if err != nil {
				out = map[string]string{"error": err.Error(), "reason": string(reason.Of(err, ""))}
			} else {
				out = map[string]any{"token": cred.Bearer, "input": in}
			}
			b, jerr := json.MarshalIndent(out, "", "  ")
			if jerr != nil {
				t.Fatal(jerr)
			}
			goldenFile(t, filepath.Join("testdata", "checkrequests", name+".golden"), string(b)+"\n")
		})
	}
}

func goldenFile(t *testing.T, path, got string) {
	t.Helper()
	testkit.Golden(t, *update, path, []byte(got))
}

func FuzzFromCheckRequest(f *testing.F) {
	for _, r := range loadCheckRequests(f) {
		h := r.GetAttributes().GetRequest().GetHttp()
		ext := r.GetAttributes().GetContextExtensions()
		f.Add(h.GetMethod(), h.GetPath(), h.GetHeaders()["authorization"], "x-request-id", "1", ExtAction, ext[ExtAction])
	}
	f.Add("GET", "/api/orders/1", "Bearer t", "cookie", "a=b", ExtResource, "ledger")
	f.Add("PROPFIND", "//a/../../b/%2e%2E/%2F?x=%zz&y", "bEaReR\tt", "x-svc-user-id", "root", ExtTenant, "")
	f.Add("", "", "", "", "", "", "")
	f.Add("GET", "/orders/1", "", "x-forwarded-client-cert", "URI=spiffe://acme.example/x", "", "")

	m, err := NewMapper(testTenant, testRoutes)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, method, path, authz, hk, hv, ek, ev string) {
		r := checkReq(method, path, map[string]string{"authorization": authz, strings.ToLower(hk): hv}, map[string]string{ek: ev})
		cred, in, err := m.FromCheckRequest(r)
		if err != nil {
			if c := reason.Of(err, ""); c != reason.InputInvalid && c != reason.PathInvalid {
				t.Fatalf("error without reason %s or %s: %v", reason.InputInvalid, reason.PathInvalid, err)
			}
			return
		}
		if in.Action == "" || in.Request == nil {
			t.Fatalf("incomplete input %+v", in)
		}
		if !strings.HasPrefix(in.Request.Path, "/") {
			t.Fatalf("path %q is not absolute", in.Request.Path)
		}
		// The normalized path is a fixed point of normalization.
		if _, again, err := cleanPath(in.Request.Path); err != nil || again != in.Request.Path {
			t.Fatalf("normalizing %q again gave %q, %v", in.Request.Path, again, err)
		}
		// The engine sets the canonical fields from the path again: it
		// must find what the mapping set.
		if c, f, err := m.canon.Path(in.Request.Path); err != nil || c != in.Request.CanonicalPath || f != in.Request.Format {
			t.Fatalf("path %q: mapped canonical %q %q, from the path %q %q %v", in.Request.Path, in.Request.CanonicalPath, in.Request.Format, c, f, err)
		}
		for k := range in.Request.Headers {
			if strippedHeaders[k] || strings.HasPrefix(k, ":") || strings.HasPrefix(k, HeaderPrefix) {
				t.Fatalf("header %q reached the input", k)
			}
		}
		if cred.Bearer != "" && !strings.Contains(authz, cred.Bearer) {
			t.Fatalf("token %q is not from the authorization header", cred.Bearer)
		}
		if cred.Bearer != "" && cred.APIKey != "" {
			t.Fatalf("two credentials: %+v", cred)
		}
		if cred.APIKey != "" && !strings.Contains(authz, cred.APIKey) && !strings.Contains(hv, cred.APIKey) {
			t.Fatalf("API key %q is from neither the authorization nor the x-api-key header", cred.APIKey)
		}
		if !cred.ClientCert.IsZero() {
			// Only Envoy's attributes name a client certificate, never a header.
			t.Fatalf("client certificate %+v from the headers", cred.ClientCert)
		}
		if in.Resource.Tenant == "" && ev == "" {
			t.Fatalf("no resource tenant")
		}
	})
}

func FuzzHTTPCheck(f *testing.F) {
	f.Add("GET", "/check", "/api/orders/1?a=b", "DELETE", "", "Bearer t", "X-Svc-Admin", "1")
	f.Add("POST", "/check", "", "", "/api/x", "bearer", "X-Forwarded-Method", "PUT")
	f.Add("PATCH", "/check/envoy/api/orders/1", "", "", "", "", "X-Original-URI", "/%zz")
	f.Add("GET", "/check/envoy/", "", "", "", "Basic x", "Cookie", "a")
	f.Add("M-SEARCH", "/check/envoy/a%2Fb/../c", "/x", "get", "/y", "Bearer", "", "")

	var cfg config.Config
	cfg.SDK.TenantID = testTenant
	cfg.Audit.Destination = config.AuditOff
	cfg.Sidecar.Routes = testRoutes
	s := newTestServer(f, cfg, newTestEngine(f, cfg, nil))
	mux := http.NewServeMux()
	s.RegisterHTTP(mux)

	allowed := map[int]bool{200: true, 301: true, 307: true, 308: true, 400: true, 401: true, 403: true, 429: true, 503: true}
	f.Fuzz(func(t *testing.T, method, target, origURI, origMethod, fwdURI, authz, hk, hv string) {
		u, err := url.ParseRequestURI(target)
		if err != nil || method == "" || strings.ContainsAny(method, " \t\r\n") {
			return // net/http never hands such a request to a handler
		}
		req := &http.Request{Method: method, URL: u, RequestURI: target, Host: "shop.example", Header: http.Header{}}
		set := func(k, v string) {
			if k != "" && v != "" {
				req.Header.Set(k, v)
			}
		}
		set("X-Original-URI", origURI)
		set(HeaderNginxMethod, origMethod)
		set("X-Forwarded-Uri", fwdURI)
		set("Authorization", authz)
		set(hk, hv)
		_, pattern := mux.Handler(req)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if pattern != CheckPath && pattern != EnvoyCheckPrefix+"/" {
			return // the mux answered (redirect, 404, bad request), not the check
		}
		if !allowed[rec.Code] {
			t.Fatalf("status %d", rec.Code)
		}
		if rec.Code == 400 || rec.Code == 401 || rec.Code == 403 || rec.Code == 429 || rec.Code == 503 {
			var b DenyBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
				t.Fatalf("deny body %q: %v", rec.Body.String(), err)
			}
			if b.Allow || b.Reason == "" || b.DenyReasons == nil {
				t.Fatalf("deny body %+v", b)
			}
			if st := rec.Header().Get(HeaderStatus); st != "" && rec.Code != 401 && rec.Code != 403 {
				t.Fatalf("nginx mode answered %d", rec.Code)
			}
		}
	})
}

// FuzzRolesHeader holds x-svc-roles to its documented format: one item per
// role, split on ",", each percent-decoding back to the role, and nothing
// that could end or split the header.
func FuzzRolesHeader(f *testing.F) {
	f.Add("viewer", "x,admin", `a"b`)
	f.Add("100%", "a b", "\x00\r\n\x7f")
	f.Add("caf\u00e9", "%2C", "")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		roles := []string{a, b, c}
		for _, r := range roles {
			if !utf8.ValidString(r) {
				return // roles come from decoded JSON strings: always UTF-8
			}
		}
		h := rolesHeader(roles)
		if i := strings.IndexFunc(h, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '"' || r == ' ' }); i >= 0 {
			t.Fatalf("rolesHeader(%q) = %q holds %q", roles, h, h[i])
		}
		items := strings.Split(h, ",")
		if len(items) != len(roles) {
			t.Fatalf("rolesHeader(%q) = %q: %d items", roles, h, len(items))
		}
		for i, it := range items {
			dec, err := url.PathUnescape(it)
			if err != nil || dec != roles[i] {
				t.Fatalf("item %q of %q decodes to %q (%v), want %q", it, h, dec, err, roles[i])
			}
		}
	})
}

// FuzzForwardedRequest checks where /check takes the original method
// from: only from the method header of the proxy whose URI header named
// the request (nginx: X_Svc_Method; Caddy: X-Forwarded-Method), never
// from the check request's own method nor X-Original-Method, and never
// when the two method headers disagree.
func FuzzForwardedRequest(f *testing.F) {
	f.Add(uint8(0), "/orders/1", "", "GET", "/orders/1", "DELETE")
	f.Add(uint8(0), "/orders/1", "POST", "", "/orders/1", "")
	f.Add(uint8(0), "/orders/1", "", "DELETE", "", "DELETE")
	f.Add(uint8(0), "/orders/1", "", "GET", "", "")
	f.Add(uint8(1), "/orders/1", "", "", "/public", "DELETE")
	f.Add(uint8(2), "/public", "GET", "GET", "/orders/1", "PUT")
	f.Add(uint8(3), "/orders/1", "GET", "", "", "")
	modes := []string{config.CheckProxyAuto, config.CheckProxyNginx, config.CheckProxyForwarded, config.CheckProxyEnvoy}
	f.Fuzz(func(t *testing.T, mode uint8, origURI, svcMethod, origMethod, fwdURI, fwdMethod string) {
		proxy := modes[int(mode)%len(modes)]
		decide := func(withOrigMethod bool) (proxyRequest, error) {
			r := httptest.NewRequest(http.MethodGet, CheckPath, nil)
			for k, v := range map[string]string{"X-Original-URI": origURI, HeaderNginxMethod: svcMethod, "X-Forwarded-Uri": fwdURI, "X-Forwarded-Method": fwdMethod} {
				if v != "" {
					r.Header[http.CanonicalHeaderKey(k)] = []string{v}
				}
			}
			if withOrigMethod && origMethod != "" {
				r.Header.Set("X-Original-Method", origMethod)
			}
			pr, _, err := forwardedRequest(r, proxy)
			return pr, err
		}
		pr, err := decide(true)
		if pr2, err2 := decide(false); pr2.method != pr.method || pr2.target != pr.target || (err == nil) != (err2 == nil) {
			t.Fatalf("%s: X-Original-Method %q changed the outcome: %q %v, without it %q %v", proxy, origMethod, pr.method, err, pr2.method, err2)
		}
		if err != nil {
			if c := reason.Of(err, ""); c != reason.InputInvalid && c != reason.MethodUntrusted {
				t.Fatalf("%s: reason %q, want %s or %s", proxy, c, reason.InputInvalid, reason.MethodUntrusted)
			}
			return
		}
		if proxy == config.CheckProxyEnvoy {
			t.Fatalf("envoy: /check took %s %s", pr.method, pr.target)
		}
		nginx := proxy != config.CheckProxyForwarded && origURI != ""
		want := fwdMethod
		if nginx {
			want = svcMethod
		}
		if want == "" || pr.method != want {
			t.Fatalf("%s: method %q, but the proxy's header named %q", proxy, pr.method, want)
		}
		if svcMethod != "" && fwdMethod != "" && !strings.EqualFold(svcMethod, fwdMethod) {
			t.Fatalf("%s: took %q while X_Svc_Method %q and X-Forwarded-Method %q disagree", proxy, pr.method, svcMethod, fwdMethod)
		}
	})
}
