package server_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/svc-dev/svc/authz"
	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/servertest"
)

// Decision ids are random; messages are the engine's wording, checked
// to be present by the gRPC tests.
var (
	decisionIDField = regexp.MustCompile(`"decision_id":"[^"]+"`)
	revisionField   = regexp.MustCompile(`"policy_revision":"[^"]+"`)
	messageField    = regexp.MustCompile(`"message":"[^"]+"`)
)

func TestHTTPAPI(t *testing.T) {
	p := servertest.NewIDP(t)
	base := servertest.ServeHTTP(t, servertest.NewServer(t, servertest.NewEngine(t, p, func(c *config.Config) {
		c.Policy.Dir = "testdata/policy-conflict"
	})))

	defaultPolicy := servertest.ServeHTTP(t, servertest.NewServer(t, servertest.NewEngine(t, p, nil)))
	dev := servertest.ServeHTTP(t, servertest.NewServer(t, servertest.NewEngine(t, nil, nil)))

	viewer := p.TokenFor(t, servertest.FixedUser("alice", "viewer"))
	tests := []struct {
		name   string
		base   string
		method string
		path   string
		body   string
		header map[string]string
		status int
		golden string // testdata/http/<golden>.json, ids and messages masked
		code   string // error code expected instead of a golden
	}{
		{name: "validate token from body", base: base, path: authz.PathValidateToken, body: `{"token":"` + viewer + `"}`, status: 200, golden: "validate-ok"},
		{name: "validate token from bearer header", base: base, path: authz.PathValidateToken, header: map[string]string{"Authorization": "Bearer " + viewer}, status: 200, golden: "validate-ok"},
		{name: "validate lowercase bearer scheme", base: base, path: authz.PathValidateToken, body: `{}`, header: map[string]string{"Authorization": "bearer " + viewer}, status: 200, golden: "validate-ok"},
		{name: "validate garbage token is a decision", base: base, path: authz.PathValidateToken, body: `{"token":"garbage"}`, status: 200, golden: "validate-malformed"},
		{name: "validate without token", base: base, path: authz.PathValidateToken, body: ``, status: 200, golden: "validate-missing"},
		{name: "validate in development mode", base: dev, path: authz.PathValidateToken, body: `{"token":"anything"}`, status: 200, golden: "validate-dev"},
		{name: "authorize allowed", base: defaultPolicy, path: authz.PathAuthorize, body: `{"token":"` + viewer + `","action":"orders:read","resource":{"id":"o-1"}}`, status: 200, golden: "authorize-allowed"},
		{name: "authorize denied", base: defaultPolicy, path: authz.PathAuthorize, body: `{"action":"orders:delete","resource":{"type":"orders","id":"o-1"}}`, header: map[string]string{"Authorization": "Bearer " + viewer}, status: 200, golden: "authorize-denied"},
		{name: "authorize invalid token", base: defaultPolicy, path: authz.PathAuthorize, body: `{"token":"a.b.c","action":"orders:read"}`, status: 200, golden: "authorize-invalid-token"},
		{name: "authorize with request info", base: defaultPolicy, path: authz.PathAuthorize, body: `{"token":"` + viewer + `","action":"orders:read","request":{"method":"GET","path":"/orders","query":{"a":"b"}}}`, status: 200, golden: "authorize-allowed"},
		{name: "body token wins over header", base: defaultPolicy, path: authz.PathAuthorize, body: `{"token":"a.b.c","action":"orders:read"}`, header: map[string]string{"Authorization": "Bearer " + viewer}, status: 200, golden: "authorize-invalid-token"},
		{name: "engine cannot decide", base: base, path: authz.PathAuthorize, body: `{"token":"` + viewer + `","action":"orders:read","resource":{"id":"conflict"}}`, status: 500, code: "policy-error"},
		{name: "action missing", base: base, path: authz.PathAuthorize, body: `{"token":"x"}`, status: 400, code: "input-invalid"},
		{name: "bad JSON", base: base, path: authz.PathAuthorize, body: `{"token":`, status: 400, code: "input-invalid"},
		{name: "unknown field", base: base, path: authz.PathAuthorize, body: `{"action":"orders:read","user":{"id":"root"}}`, status: 400, code: "input-invalid"},
		{name: "wrong type", base: base, path: authz.PathValidateToken, body: `{"token":42}`, status: 400, code: "input-invalid"},
		{name: "trailing garbage", base: base, path: authz.PathValidateToken, body: `{"token":"x"} {}`, status: 400, code: "input-invalid"},
		{name: "body over 1 MiB", base: base, path: authz.PathAuthorize, body: `{"token":"` + strings.Repeat("a", 1<<20) + `"}`, status: 413, code: "input-invalid"},
		{name: "GET not allowed", base: base, method: http.MethodGet, path: authz.PathAuthorize, status: 405, code: "input-invalid"},
		{name: "PUT not allowed", base: base, method: http.MethodPut, path: authz.PathValidateToken, body: `{}`, status: 405, code: "input-invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			got := servertest.Post(t, method, tt.base+tt.path, tt.body, tt.header)
			if got.Status != tt.status {
				t.Fatalf("status %d, want %d; body %s", got.Status, tt.status, got.Body)
			}
			if ct := got.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if tt.status == http.StatusMethodNotAllowed && got.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow %q, want POST", got.Header.Get("Allow"))
			}
			if tt.code != "" {
				var e authz.ErrorBody
				if err := json.Unmarshal(got.Body, &e); err != nil {
					t.Fatalf("error body %s: %v", got.Body, err)
				}
				if string(e.Error.Code) != tt.code || e.Error.Message == "" {
					t.Errorf("error %+v, want code %q and a message", e.Error, tt.code)
				}
				if strings.Contains(string(got.Body), viewer) {
					t.Error("the error body quotes the token")
				}
				return
			}
			masked := decisionIDField.ReplaceAll(got.Body, []byte(`"decision_id":"<decision-id>"`))
			// The default revision is a digest of the policy sources.
			masked = revisionField.ReplaceAll(masked, []byte(`"policy_revision":"<revision>"`))
			masked = messageField.ReplaceAll(masked, []byte(`"message":"<message>"`))
			testkit.Golden(t, *update, filepath.Join("testdata", "http", tt.golden+".json"), masked)
		})
	}
}

// TestHTTPMirrorsGRPC checks that the JSON of the HTTP API decodes
// (protojson) to the message the gRPC service returns for the same
// request.
func TestHTTPMirrorsGRPC(t *testing.T) {
	p := servertest.NewIDP(t)
	s := servertest.NewServer(t, servertest.NewEngine(t, p, nil))
	base := servertest.ServeHTTP(t, s)
	rpc := rpcClient(t, servertest.ServeGRPC(t, s))
	viewer := p.TokenFor(t, servertest.FixedUser("alice", "viewer", "billing"))

	requests := []struct {
		name string
		req  *authzv1.AuthorizeRequest
	}{
		{"allowed", &authzv1.AuthorizeRequest{Token: viewer, Action: "invoices:void", Resource: &authzv1.Resource{Id: "i-1"}}},
		{"denied", &authzv1.AuthorizeRequest{Token: viewer, Action: "orders:delete"}},
		{"invalid token", &authzv1.AuthorizeRequest{Token: "nope", Action: "orders:read"}},
		{"with request", &authzv1.AuthorizeRequest{Token: viewer, Action: "orders:read",
			Request: &authzv1.RequestInfo{Method: "GET", Path: "/o", Query: map[string]string{"q": "1"}, Headers: map[string]string{"x-a": "b"}}}},
	}
	ignore := protocmp.IgnoreFields(&authzv1.AuthorizeResponse{}, "decision_id")
	for _, tt := range requests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := protojson.Marshal(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			reply := servertest.Post(t, http.MethodPost, base+authz.PathAuthorize, string(body), nil)
			if reply.Status != http.StatusOK {
				t.Fatalf("status %d: %s", reply.Status, reply.Body)
			}
			fromHTTP := &authzv1.AuthorizeResponse{}
			if err := protojson.Unmarshal(reply.Body, fromHTTP); err != nil {
				t.Fatalf("HTTP body is not protojson of AuthorizeResponse: %v", err)
			}
			fromGRPC, err := rpc.Authorize(t.Context(), proto.Clone(tt.req).(*authzv1.AuthorizeRequest))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(fromGRPC, fromHTTP, protocmp.Transform(), ignore); diff != "" {
				t.Errorf("gRPC vs HTTP (-grpc +http):\n%s", diff)
			}
		})
	}
}

func TestProtoJSONRoundTrip(t *testing.T) {
	claims := mustStruct(t, map[string]any{"sub": "alice", "roles": []any{"viewer"}, "n": 1.5, "ok": true, "none": nil})
	msgs := []struct {
		name string
		msg  proto.Message
	}{
		{"ValidateTokenRequest", &authzv1.ValidateTokenRequest{Token: "t"}},
		{"ValidateTokenResponse", &authzv1.ValidateTokenResponse{Allowed: true, Claims: claims, Reason: "ok", Subject: "alice", TenantId: tenant}},
		{"AuthorizeRequest", &authzv1.AuthorizeRequest{Token: "t", Action: "orders:read", Resource: &authzv1.Resource{Type: "orders", Id: "o-1", Tenant: tenant},
			Request: &authzv1.RequestInfo{Method: "GET", Path: "/orders/o-1", Host: "h", Query: map[string]string{"a": "b"}, Headers: map[string]string{"x": "y"}}}},
		{"AuthorizeResponse", &authzv1.AuthorizeResponse{Allowed: false, Reason: "rate-limited", DenyReasons: []string{"rate-limited"}, DecisionId: "d",
			Subject: "alice", TenantId: tenant, Claims: claims, PolicyRevision: "r1", RetryAfter: durationpb.New(1500 * time.Millisecond), Message: "m"}},
	}
	for _, tt := range msgs {
		t.Run(tt.name, func(t *testing.T) {
			for _, opts := range []protojson.MarshalOptions{{}, {UseProtoNames: true, EmitUnpopulated: true}} {
				b, err := opts.Marshal(tt.msg)
				if err != nil {
					t.Fatal(err)
				}
				back := tt.msg.ProtoReflect().New().Interface()
				if err := protojson.Unmarshal(b, back); err != nil {
					t.Fatalf("%s: %v", b, err)
				}
				if diff := cmp.Diff(tt.msg, back, protocmp.Transform()); diff != "" {
					t.Errorf("round trip of %s (-want +got):\n%s", b, diff)
				}
			}
		})
	}
}
