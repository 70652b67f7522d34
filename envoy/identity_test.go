package envoy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/proto"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// identityServer is a Server minting identity tokens, deciding with res.
func identityServer(t *testing.T, res engine.Result) (*Server, *idtoken.Minter) {
	t.Helper()
	m, err := idtoken.New(idtoken.Options{KeyFile: testkit.TokenKeyFile(t), TTL: time.Minute, Issuer: "svc-sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	az := authorizerFunc(func(_ context.Context, req engine.Request) (engine.Result, error) { return res, nil })
	s, err := New(config.Config{}, az, Deps{Logger: quietLogger(), Identity: m})
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

// verifyIdentity verifies tok against m's key set as an upstream does and
// returns its claims.
func verifyIdentity(t *testing.T, m *idtoken.Minter, tok string) map[string]any {
	t.Helper()
	doc, err := m.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	claims, err := testkit.VerifyJWT(doc, tok)
	if err != nil {
		t.Fatalf("identity token does not verify: %v", err)
	}
	return claims
}

func identityCheck(principal, forged string) *authv3.CheckRequest {
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "GET", Path: "/api/orders/1", Host: "orders.internal",
			Headers: map[string]string{"authorization": "Bearer abc"},
		}},
	}}
	if principal != "" {
		req.Attributes.Destination = &authv3.AttributeContext_Peer{Principal: principal}
	}
	if forged != "" {
		req.Attributes.Request.Http.Headers[HeaderIdentity] = forged
	}
	return req
}

// TestCheckIdentityToken: an allowed Check carries x-svc-identity,
// overwriting a client's copy, for the destination's principal (else the
// host); development mode's anonymous caller gets none, and a client's
// copy is removed.
func TestCheckIdentityToken(t *testing.T) {
	res := allowedResult("alice", "acme", []string{"viewer"}, "d-1")
	res.Token.Kind = engine.KindJWT
	anon := allowedResult("anonymous", "dev", nil, "d-2")
	anon.Token.Reason = reason.DevAnonymous

	cases := []struct {
		name      string
		res       engine.Result
		principal string
		wantAud   any // nil: no token
	}{
		{"principal is the audience", res, "spiffe://cluster.local/ns/shop/sa/orders", []any{"spiffe://cluster.local/ns/shop/sa/orders"}},
		{"host is the audience without a principal", res, "", []any{"orders.internal"}},
		{"no token for development mode's anonymous caller", anon, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, m := identityServer(t, tc.res)
			client := serveGRPC(t, s)
			resp, err := client.Check(t.Context(), identityCheck(tc.principal, "forged.token.value"))
			if err != nil {
				t.Fatal(err)
			}
			ok := resp.GetOkResponse()
			if ok == nil {
				t.Fatalf("not allowed: %v", resp)
			}
			var tok string
			for _, h := range ok.GetHeaders() {
				if h.GetHeader().GetKey() == HeaderIdentity {
					if h.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
						t.Errorf("x-svc-identity action %v, want OVERWRITE_IF_EXISTS_OR_ADD", h.GetAppendAction())
					}
					tok = h.GetHeader().GetValue()
				}
			}
			removed := false
			for _, r := range ok.GetHeadersToRemove() {
				removed = removed || r == HeaderIdentity
			}
			if tc.wantAud == nil {
				if tok != "" || !removed {
					t.Fatalf("token %q, client's copy removed %v; want none, removed", tok, removed)
				}
				return
			}
			if removed {
				t.Error("x-svc-identity is both set and removed")
			}
			claims := verifyIdentity(t, m, tok)
			for k, want := range map[string]any{"sub": "alice", "tenant_id": "acme", "kind": "jwt", "decision_id": "d-1"} {
				if claims[k] != want {
					t.Errorf("claim %s = %v, want %v", k, claims[k], want)
				}
			}
			if got, _ := claims["aud"].([]string); len(got) != 1 || got[0] != tc.wantAud.([]any)[0] {
				t.Errorf("aud = %v, want %v", claims["aud"], tc.wantAud)
			}
		})
	}
}

// TestCheckAnswerIdentityEncoding: the hand-written encoder writes an
// answer with an identity token as protobuf does.
func TestCheckAnswerIdentityEncoding(t *testing.T) {
	v := decide(allowedResult("alice", "acme", []string{"viewer"}, "d-1"), nil)
	v.identity = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2ln"
	a := &CheckAnswer{v: v, remove: []string{"x-svc-admin"}}
	got := encodeAnswer(t, a)
	want, err := proto.MarshalOptions{Deterministic: true}.Marshal((&CheckAnswer{v: v, remove: a.remove}).Response())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("encoder and protobuf differ:\n got %x\nwant %x", got, want)
	}
}

// TestHTTPCheckIdentityToken: the HTTP check answers 200 with
// X-Svc-Identity for the Host, and an empty one without a token, which
// nginx's proxy_set_header leaves out.
func TestHTTPCheckIdentityToken(t *testing.T) {
	res := allowedResult("alice", "acme", []string{"viewer"}, "d-1")
	s, m := identityServer(t, res)
	mux := http.NewServeMux()
	s.RegisterHTTP(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+CheckPath, nil)
	req.Host = "orders.internal"
	req.Header.Set("X-Original-Uri", "/api/orders/1")
	req.Header.Set(HeaderNginxMethod, "GET")
	req.Header.Set("Authorization", "Bearer abc")
	req.Header.Set("X-Svc-Identity", "forged")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	claims := verifyIdentity(t, m, resp.Header.Get("X-Svc-Identity"))
	if aud, _ := claims["aud"].([]string); len(aud) != 1 || aud[0] != "orders.internal" {
		t.Errorf("aud = %v, want [orders.internal]", claims["aud"])
	}
}
