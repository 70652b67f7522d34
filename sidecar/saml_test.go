package sidecar

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/samltest"
	"github.com/svc-dev/svc/reason"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// samlStatus is r's status, which must be 200 and hold a saml section.
func samlStatus(t *testing.T, r *running) Status {
	t.Helper()
	code, body := get(t, r, PathStatus)
	var st Status
	if code != http.StatusOK || json.Unmarshal(body, &st) != nil || st.SAML == nil {
		t.Fatalf("status %d %s", code, body)
	}
	return st
}

// samlConfig is testConfig with the SAML gateway on a free port, trusting
// a generated test identity provider, which it returns too.
func samlConfig(t testing.TB) (config.Config, *testidp.IdP) {
	t.Helper()
	idp := samltest.New(t)
	md := samltest.MetadataFile(t, idp)
	cfg := testConfig(newTestIdP(t))
	cfg.Sidecar.SAMLAddr = "127.0.0.1:0"
	cfg.SDK.SAML = &config.SAML{
		EntityID: "https://shop.example/auth/saml/metadata", ACSURL: "https://shop.example/auth/saml/acs",
		IDPMetadataFile: md,
	}
	return cfg, idp
}

// A SAML sign-on on the gateway's own listener yields a session cookie
// that an Envoy Check through the sidecar accepts, with the SAML user's
// claims in the upstream headers; status shows the gateway. The replay
// cache is in a Redis as managed services run it (TLS from a private
// CA, an ACL user with a password): the same assertion posted again is
// refused through it.
func TestSAMLSignOnThenCheck(t *testing.T) {
	cfg, idp := samlConfig(t)
	// IdP-initiated, which a production configuration allows only with
	// a replay cache that replicas and restarts share.
	cfg.SDK.SAML.AllowIDPInitiated = true
	ca := testkit.NewCA(t, "redis-ca")
	server := ca.Server(t)
	cfg.RateLimit.RedisAddr = redistest.StartWith(t, redistest.Options{User: "svc", Password: "pw-2", TLS: &server, Roots: ca.Pool()})
	cfg.RateLimit.RedisTLS, cfg.RateLimit.RedisTLSCAFile = true, testkit.TempFile(t, "ca.pem", ca.PEM)
	cfg.RateLimit.RedisUsername, cfg.RateLimit.RedisPasswordFile = "svc", testkit.TempFile(t, "pw", []byte("pw-2\n"))
	r := startSidecar(t, cfg)
	if r.SAMLAddr() == nil {
		t.Fatal("no SAML listener")
	}
	base := "http://" + r.SAMLAddr().String() + "/auth/saml"

	doc, err := idp.Sign(testidp.Response{
		Destination: cfg.SDK.SAML.ACSURL, Recipient: cfg.SDK.SAML.ACSURL, Audience: cfg.SDK.SAML.EntityID,
		NameID: "carol@example.com",
		Attributes: []testidp.Attribute{
			{Name: "role", Values: []string{"admin"}}, {Name: "tenant_id", Values: []string{testTenant}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(base+"/acs", url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("ACS status %d, want 303", resp.StatusCode)
	}
	replay, err := client.PostForm(base+"/acs", url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}})
	if err != nil {
		t.Fatal(err)
	}
	replayBody, _ := io.ReadAll(replay.Body)
	replay.Body.Close()
	if replay.StatusCode == http.StatusSeeOther || !strings.Contains(string(replayBody), string(reason.SAMLReplayed)) {
		t.Fatalf("the assertion posted again: %d %s, want %s", replay.StatusCode, replayBody, reason.SAMLReplayed)
	}
	var session string
	for _, c := range resp.Cookies() {
		// acs_url is https: the gateway names its cookie __Host-<cookie_name>.
		if c.Name == "__Host-svc_session" {
			session = c.Value
		}
	}
	if session == "" {
		t.Fatal("no session cookie")
	}

	conn := dial(t, r.GRPCAddr())
	req := checkRequest("", http.MethodGet, "/orders/7")
	req.Attributes.Request.Http.Headers["cookie"] = "theme=dark; __Host-svc_session=" + session
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	out, err := authv3.NewAuthorizationClient(conn).Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if code.Code(out.GetStatus().GetCode()) != code.Code_OK {
		t.Fatalf("Check with the session cookie: %v", out.GetDeniedResponse())
	}
	headers := map[string]string{}
	for _, h := range out.GetOkResponse().GetHeaders() {
		headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	if headers["x-svc-user-id"] != "carol@example.com" || headers["x-svc-tenant-id"] != testTenant || !strings.Contains(headers["x-svc-roles"], "admin") {
		t.Errorf("upstream headers %v, want the SAML user's claims", headers)
	}

	// The HTTP check (nginx auth_request) takes the token from the cookie
	// too, and without it the request is not authenticated.
	for _, tc := range []struct {
		cookie string
		want   int
	}{{"theme=dark; __Host-svc_session=" + session, http.StatusOK}, {"theme=dark", http.StatusUnauthorized}} {
		hreq, _ := http.NewRequest(http.MethodGet, "http://"+r.HTTPAddr().String()+"/check", nil)
		hreq.Header.Set("X-Original-URI", "/orders/7")
		hreq.Header.Set("X_Svc_Method", http.MethodGet)
		hreq.Header.Set("Cookie", tc.cookie)
		hresp, err := httpClient.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		hresp.Body.Close()
		if hresp.StatusCode != tc.want {
			t.Errorf("HTTP check with Cookie %q: %d, want %d", tc.cookie, hresp.StatusCode, tc.want)
		}
		if tc.want == http.StatusOK && hresp.Header.Get("X-Svc-User-Id") != "carol@example.com" {
			t.Errorf("HTTP check: X-Svc-User-Id %q, want the SAML user", hresp.Header.Get("X-Svc-User-Id"))
		}
	}

	status, body := get(t, r, PathStatus)
	var st Status
	if status != http.StatusOK || json.Unmarshal(body, &st) != nil || st.SAML == nil || !st.SAML.IDPMetadata.Loaded {
		t.Errorf("status %d %s: want the SAML gateway with its metadata loaded", status, body)
	}
	testkit.Eventually(t, "Redis checked", func() bool { return r.redis.status().CheckedAt != nil })
	if rs := r.redis.status(); rs.Evicts || rs.MaxMemoryPolicy != "noeviction" || rs.LastError != "" {
		t.Errorf("redis status %+v: want noeviction read over TLS as the ACL user", rs)
	}
}

// While the IdP metadata URL fails the sidecar reports itself degraded
// with the fetch error and the login answers 503; once the IdP answers,
// the metadata is loaded and the status is healthy again.
func TestSAMLMetadataURLInStatus(t *testing.T) {
	cfg, idp := samlConfig(t)
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			http.Error(w, "maintenance", http.StatusBadGateway)
			return
		}
		_, _ = w.Write(idp.Metadata())
	}))
	t.Cleanup(srv.Close)
	cfg.SDK.SAML.IDPMetadataFile, cfg.SDK.SAML.IDPMetadataURL = "", srv.URL
	r := startSidecar(t, cfg)

	status := func() Status { return samlStatus(t, r) }
	waitFor := func(what string, ok func(Status) bool) Status {
		t.Helper()
		var st Status
		testkit.Poll(t, 60*time.Second, what, func() (bool, string) {
			st = status()
			return ok(st), fmt.Sprintf("%+v", st.SAML.IDPMetadata)
		})
		return st
	}
	st := waitFor("fetch error", func(st Status) bool { return st.SAML.IDPMetadata.LastError != "" })
	if st.Status != StatusDegraded || st.Reason != "saml-idp-metadata-unavailable" || st.SAML.IDPMetadata.Loaded ||
		!strings.Contains(st.SAML.IDPMetadata.LastError, "502") || st.SAML.IDPMetadata.Source != srv.URL {
		t.Errorf("while the IdP fails: status %q reason %q metadata %+v", st.Status, st.Reason, st.SAML.IDPMetadata)
	}
	resp, err := httpClient.Get("http://" + r.SAMLAddr().String() + "/auth/saml/login")
	if err != nil {
		t.Fatal(err)
	}
	var refusal map[string]string
	_ = json.NewDecoder(resp.Body).Decode(&refusal)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || refusal["error"] != "saml-idp-unavailable" {
		t.Errorf("login without metadata: %d %v, want 503 saml-idp-unavailable", resp.StatusCode, refusal)
	}

	up.Store(true) // the retry comes within metadataRetryMin (5s)
	st = waitFor("loaded metadata", func(st Status) bool { return st.SAML.IDPMetadata.Loaded })
	if st.Status != StatusHealthy || st.SAML.IDPMetadata.Stale || st.SAML.IDPMetadata.LastError != "" || st.SAML.IDPMetadata.EntityID != idp.EntityID {
		t.Errorf("after recovery: status %q metadata %+v", st.Status, st.SAML.IDPMetadata)
	}
}

// While SVC_ENV=development turns the gateway's signature checks off (a
// SAML-only configuration on loopback listeners, fail_mode closed or
// not), the status is degraded with saml-signature-check-disabled; the
// same configuration without the variable is healthy.
func TestSAMLSignatureCheckDisabledDegrades(t *testing.T) {
	cfg, _ := samlConfig(t)
	cfg.SDK.JWKSURL = ""
	statusOf := func(r *running) Status { return samlStatus(t, r) }
	if st := statusOf(startSidecar(t, cfg)); st.Status != StatusHealthy || st.Reason != "" || st.SAML.SignatureCheckDisabled {
		t.Errorf("without SVC_ENV: status %q reason %q signature check disabled %v, want healthy", st.Status, st.Reason, st.SAML.SignatureCheckDisabled)
	}
	t.Setenv("SVC_ENV", "development")
	st := statusOf(startSidecar(t, cfg))
	if st.Status != StatusDegraded || st.Reason != "saml-signature-check-disabled" || !st.SAML.SignatureCheckDisabled || !st.Ready {
		t.Errorf("with SVC_ENV=development: status %q reason %q signature check disabled %v ready %v, want degraded saml-signature-check-disabled, ready",
			st.Status, st.Reason, st.SAML.SignatureCheckDisabled, st.Ready)
	}
}
