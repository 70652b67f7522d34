package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/wire"
)

// rpcTimeout bounds one call to the sidecar.
const rpcTimeout = 10 * time.Second

// keyring is the test's own identity provider: signing keys of every
// supported kind plus a weak one, published by an in-test JWKS server.
type keyring struct {
	rsa, ps, ec *harness.Signer
	// weak is a 1024-bit RSA key; it is published, and the sidecar must
	// refuse it.
	weak *harness.Signer
	// stranger signs with a key that is not published, under rsa's kid.
	stranger *harness.Signer
	jwks     *harness.JWKSServer
}

func newKeyring(t testing.TB) *keyring {
	t.Helper()
	k := &keyring{
		rsa:  harness.NewRSASigner(t, "rsa-1", 2048, "RS256"),
		ps:   harness.NewRSASigner(t, "ps-1", 2048, "PS256"),
		ec:   harness.NewECSigner(t, "ec-1"),
		weak: harness.NewRSASigner(t, "weak-1", 1024, "RS256"),
	}
	k.stranger = harness.NewRSASigner(t, "rsa-1", 2048, "RS256")
	k.jwks = harness.StartJWKS(t, k.rsa, k.ps, k.ec, k.weak)
	return k
}

// token returns an RS256 token of a valid claim set.
func (k *keyring) token(t testing.TB, sub, tenant string, roles ...string) string {
	t.Helper()
	return k.rsa.Token(t, harness.Claims(sub, tenant, roles...))
}

// sidecarConfig is the svc.toml of most tests: tenant acme on plan
// "team", fail closed.
const sidecarConfig = `
[sdk]
tenant_id = "acme"
fail_mode = "closed"

[tenants.acme]
plan = "team"
`

// startSidecar starts a sidecar verifying tokens against the keyring.
func startSidecar(t testing.TB, k *keyring, env map[string]string) *harness.Sidecar {
	t.Helper()
	e := map[string]string{"SVC_JWKS_URL": k.jwks.URL}
	for n, v := range env {
		e[n] = v
	}
	return harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig, Env: e})
}

// checkResult is an Envoy CheckResponse seen as the HTTP answer Envoy
// would give: status 200 with the upstream headers, or the denial.
type checkResult struct {
	status   int
	headers  map[string]string
	body     string
	metadata *structpb.Struct
}

// forwardAuthCheck sends the sidecar's HTTP /check as Caddy's
// forward_auth sends it (X-Forwarded-Method and X-Forwarded-Uri) with a
// bearer token, and returns the answer's status and body.
func forwardAuthCheck(t testing.TB, s *harness.Sidecar, method, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL("/check"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Forwarded-Method", method)
	req.Header.Set("X-Forwarded-Uri", path)
	status, _, body := harness.Do(t, req)
	return status, string(body)
}

// repoFile returns the content of a file of the repository, named by its
// path from the module root.
func repoFile(t testing.TB, elem ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{harness.ModuleRoot(t)}, elem...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// proxyCheck sends the sidecar's HTTP /check with a bearer token and the
// headers a proxy sets, and returns the answer's status and body. To the
// nginx convention a 400 travels as 403 with the real status in
// X-Svc-Status, which the shipped nginx.conf answers: that status is the
// one returned.
func proxyCheck(t testing.TB, s *harness.Sidecar, token string, headers map[string]string) (int, string) {
	t.Helper()
	h := map[string]string{"Authorization": harness.Bearer(token)}
	maps.Copy(h, headers)
	status, answer, body := harness.Send(t, http.MethodGet, s.URL("/check"), "", h)
	if st, err := strconv.Atoi(answer.Get("X-Svc-Status")); err == nil {
		status = st
	}
	return status, string(body)
}

// envoyCheck sends an ext_authz Check for an HTTP request. An empty token
// sends no Authorization header.
func envoyCheck(t testing.TB, s *harness.Sidecar, method, path, token string, ext map[string]string) checkResult {
	t.Helper()
	headers := map[string]string{"user-agent": "e2e"}
	if token != "" {
		headers["authorization"] = "Bearer " + token
	}
	return envoyCheckHeaders(t, s, method, path, headers, ext)
}

func envoyCheckHeaders(t testing.TB, s *harness.Sidecar, method, path string, headers, ext map[string]string) checkResult {
	t.Helper()
	r, err := doCheck(s.Conn(t), method, path, headers, ext)
	if err != nil {
		t.Fatalf("Check %s %s: %v", method, path, err)
	}
	return r
}

// doCheck sends an ext_authz Check; it is safe to call from any goroutine.
func doCheck(conn grpc.ClientConnInterface, method, path string, headers, ext map[string]string) (checkResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "10.0.0.7", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 40000}},
		}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id:       "req-1",
			Method:   method,
			Path:     path,
			Host:     "api.example.test",
			Scheme:   "https",
			Protocol: "HTTP/1.1",
			Headers:  headers,
		}},
		ContextExtensions: ext,
	}}
	resp, err := authv3.NewAuthorizationClient(conn).Check(ctx, req)
	if err != nil {
		return checkResult{}, err
	}
	r := checkResult{headers: map[string]string{}, metadata: resp.GetDynamicMetadata()}
	if resp.GetStatus().GetCode() == int32(code.Code_OK) {
		if resp.GetDeniedResponse() != nil {
			return r, fmt.Errorf("status OK with a denied response")
		}
		r.status = http.StatusOK
		addHeaders(r.headers, resp.GetOkResponse().GetHeaders())
		return r, nil
	}
	d := resp.GetDeniedResponse()
	if d == nil {
		return r, fmt.Errorf("status %d without a denied response", resp.GetStatus().GetCode())
	}
	r.status = int(d.GetStatus().GetCode())
	r.body = d.GetBody()
	addHeaders(r.headers, d.GetHeaders())
	return r, nil
}

func addHeaders(dst map[string]string, hs []*corev3.HeaderValueOption) {
	for _, h := range hs {
		v := h.GetHeader().GetValue()
		if v == "" {
			v = string(h.GetHeader().GetRawValue())
		}
		dst[strings.ToLower(h.GetHeader().GetKey())] = v
	}
}

// parseDeny decodes a denial's body, which must say "allow": false.
func parseDeny(t testing.TB, body string) wire.DenyBody {
	t.Helper()
	var d wire.DenyBody
	var allow struct {
		Allow *bool `json:"allow"`
	}
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("deny body is not JSON: %v: %q", err, body)
	}
	if err := json.Unmarshal([]byte(body), &allow); err != nil || allow.Allow == nil || *allow.Allow {
		t.Errorf("deny body: allow = %v, want false: %s", allow.Allow, body)
	}
	return d
}

// hasReason reports whether reasons holds want, or a reason that starts
// with want followed by ":" (as "role-forbidden: ..." does).
func hasReason(reasons []string, want string) bool {
	return slices.ContainsFunc(reasons, func(r string) bool {
		return r == want || strings.HasPrefix(r, want+":")
	})
}

// validate calls svc.authz.v1 ValidateToken over gRPC.
func validate(t testing.TB, s *harness.Sidecar, token string) *authzv1.ValidateTokenResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := authzv1.NewAuthzServiceClient(s.Conn(t)).ValidateToken(ctx, &authzv1.ValidateTokenRequest{Token: token})
	if err != nil {
		t.Fatalf("ValidateToken: %v", err)
	}
	return resp
}

// authorize calls svc.authz.v1 Authorize over gRPC.
func authorize(t testing.TB, s *harness.Sidecar, req *authzv1.AuthorizeRequest) *authzv1.AuthorizeResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := authzv1.NewAuthzServiceClient(s.Conn(t)).Authorize(ctx, req)
	if err != nil {
		t.Fatalf("Authorize %s: %v", req.GetAction(), err)
	}
	return resp
}

// tokenKid returns the kid in a JWT's header.
func tokenKid(t testing.TB, token string) string {
	t.Helper()
	h, _, _ := strings.Cut(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(h)
	if err != nil {
		t.Fatalf("token header: %v", err)
	}
	var hdr struct {
		Kid string `json:"kid"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		t.Fatalf("token header: %v", err)
	}
	return hdr.Kid
}

// claim returns a claim of a ValidateToken answer as Go value.
func claim(resp interface{ GetClaims() *structpb.Struct }, name string) any {
	v, ok := resp.GetClaims().GetFields()[name]
	if !ok {
		return nil
	}
	return v.AsInterface()
}

// getStatus reads GET /v1/status into a T, the fields a test looks at.
func getStatus(t *testing.T, s *harness.Sidecar) wire.Status {
	t.Helper()
	code, _, body := harness.Get(t, s.URL("/v1/status"))
	var st wire.Status
	if code != http.StatusOK {
		t.Fatalf("GET /v1/status = %d %s", code, body)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("GET /v1/status: %v: %s", err, body)
	}
	return st
}

// fetchStatus reads /v1/status without failing the test, for polls that
// span a restart: the draining image closes idle keep-alive connections,
// and a poll that meets one closing, or waits longer than a loaded
// machine lets the next image take over, is no failure by itself.
func fetchStatus(s *harness.Sidecar) (wire.Status, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(s.URL("/v1/status"))
	if err != nil {
		return wire.Status{}, err
	}
	defer resp.Body.Close()
	var st wire.Status
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /v1/status = %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("GET /v1/status: %w", err)
	}
	return st, nil
}
