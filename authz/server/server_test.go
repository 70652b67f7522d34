package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/authz/server"
	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/servertest"
	"github.com/svc-dev/svc/reason"
)

// spy wraps a real engine and records what the server hands it.
type spy struct {
	server.Decider
	mu     sync.Mutex
	inputs []engine.Input
}

func (s *spy) Decide(ctx context.Context, req engine.Request) (engine.Result, error) {
	if req.Scope == engine.ScopeAuthorize {
		s.mu.Lock()
		s.inputs = append(s.inputs, req.Input)
		s.mu.Unlock()
	}
	return s.Decider.Decide(ctx, req)
}

func (s *spy) last(t *testing.T) engine.Input {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.inputs) == 0 {
		t.Fatal("the engine was not asked")
	}
	return s.inputs[len(s.inputs)-1]
}

func rpcClient(t *testing.T, addr string) authzv1.AuthzServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return authzv1.NewAuthzServiceClient(conn)
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServerValidateToken(t *testing.T) {
	p := servertest.NewIDP(t)
	rpc := rpcClient(t, servertest.ServeGRPC(t, servertest.NewServer(t, servertest.NewEngine(t, p, nil))))
	dev := rpcClient(t, servertest.ServeGRPC(t, servertest.NewServer(t, servertest.NewEngine(t, nil, nil))))

	exp, iat := time.Now().Add(time.Hour).Unix(), time.Now().Unix()
	valid := servertest.User("alice", "viewer")
	valid["exp"], valid["iat"] = exp, iat
	validClaims := mustStruct(t, map[string]any{
		"sub": "alice", "tenant_id": tenant, "roles": []any{"viewer"}, "email": "alice@example.com",
		"department": "sales", "clearance": map[string]any{"level": 3, "tags": []any{"a", "b"}},
		"exp": exp, "iat": iat,
	})
	noTenant := servertest.User("bob", "viewer")
	noTenant["tenant_id"] = nil

	tests := []struct {
		name  string
		rpc   authzv1.AuthzServiceClient
		token string
		want  *authzv1.ValidateTokenResponse
	}{
		{
			name:  "valid token",
			rpc:   rpc,
			token: p.TokenFor(t, valid),
			want:  &authzv1.ValidateTokenResponse{Allowed: true, Reason: "ok", Subject: "alice", TenantId: tenant, Claims: validClaims},
		},
		{
			name:  "expired token",
			rpc:   rpc,
			token: p.TokenFor(t, map[string]any{"sub": "alice", "tenant_id": tenant, "exp": time.Now().Add(-time.Hour).Unix(), "iat": time.Now().Add(-2 * time.Hour).Unix()}),
			want:  &authzv1.ValidateTokenResponse{Reason: "token-expired"},
		},
		{name: "garbage", rpc: rpc, token: "not-a-jwt", want: &authzv1.ValidateTokenResponse{Reason: "token-malformed"}},
		{name: "empty token", rpc: rpc, token: "", want: &authzv1.ValidateTokenResponse{Reason: "token-missing"}},
		{name: "tenant claim missing", rpc: rpc, token: p.TokenFor(t, noTenant), want: &authzv1.ValidateTokenResponse{Reason: "tenant-missing"}},
		{
			name:  "development mode accepts any bearer string",
			rpc:   dev,
			token: "anything",
			want:  &authzv1.ValidateTokenResponse{Allowed: true, Reason: "dev-anonymous", Subject: "anonymous", TenantId: tenant},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.rpc.ValidateToken(t.Context(), &authzv1.ValidateTokenRequest{Token: tt.token})
			if err != nil {
				t.Fatalf("ValidateToken: %v (a decision is never an error)", err)
			}
			if got.DecisionId == "" {
				t.Error("the answer has no decision id")
			}
			opts := cmp.Options{protocmp.Transform(), protocmp.IgnoreFields(&authzv1.ValidateTokenResponse{}, "message", "decision_id")}
			if diff := cmp.Diff(tt.want, got, opts); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if !got.Allowed && got.Message == "" {
				t.Error("a rejection carries a message")
			}
			if strings.Contains(got.Message, tt.token) && tt.token != "" {
				t.Error("the message quotes the token")
			}
		})
	}
}

func TestServerAuthorize(t *testing.T) {
	p := servertest.NewIDP(t)
	eng := &spy{Decider: servertest.NewEngine(t, p, func(c *config.Config) {
		c.RateLimit = config.RateLimit{PerTenant: map[string]int{"limited": 1}}
	})}
	rpc := rpcClient(t, servertest.ServeGRPC(t, servertest.NewServer(t, eng)))

	viewer := p.TokenFor(t, servertest.User("alice", "viewer"))
	limitedClaims := servertest.User("lee", "viewer")
	limitedClaims["tenant_id"] = "limited"
	limited := p.TokenFor(t, limitedClaims)
	ignore := protocmp.IgnoreFields(&authzv1.AuthorizeResponse{}, "decision_id", "policy_revision", "claims", "retry_after", "message")

	tests := []struct {
		name      string
		req       *authzv1.AuthorizeRequest
		want      *authzv1.AuthorizeResponse
		evaluated bool // a decision id is expected
	}{
		{
			name:      "viewer reads",
			req:       &authzv1.AuthorizeRequest{Token: viewer, Action: "orders:read", Resource: &authzv1.Resource{Id: "o-1"}},
			want:      &authzv1.AuthorizeResponse{Allowed: true, Reason: "policy-allow", DenyReasons: []string{}, Subject: "alice", TenantId: tenant},
			evaluated: true,
		},
		{
			name: "viewer may not delete",
			req:  &authzv1.AuthorizeRequest{Token: viewer, Action: "orders:delete", Resource: &authzv1.Resource{Id: "o-1"}},
			want: &authzv1.AuthorizeResponse{Reason: "policy-deny", Subject: "alice", TenantId: tenant,
				DenyReasons: []string{"role-forbidden: viewer cannot orders:delete"}},
			evaluated: true,
		},
		{
			name: "resource of another tenant",
			req:  &authzv1.AuthorizeRequest{Token: viewer, Action: "orders:read", Resource: &authzv1.Resource{Id: "o-1", Tenant: "globex"}},
			want: &authzv1.AuthorizeResponse{Reason: "policy-deny", Subject: "alice", TenantId: tenant,
				DenyReasons: []string{"tenant-mismatch"}},
			evaluated: true,
		},
		{
			name: "invalid token stops before the policy",
			req:  &authzv1.AuthorizeRequest{Token: "x.y.z", Action: "orders:read"},
			want: &authzv1.AuthorizeResponse{Reason: "token-malformed", DenyReasons: []string{}},
		},
		{
			name: "no token",
			req:  &authzv1.AuthorizeRequest{Action: "orders:read"},
			want: &authzv1.AuthorizeResponse{Reason: "token-missing", DenyReasons: []string{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rpc.Authorize(t.Context(), tt.req)
			if err != nil {
				t.Fatalf("Authorize: %v (a decision is never an error)", err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform(), ignore); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if got.DecisionId == "" {
				t.Errorf("no decision_id (policy evaluated: %v): every decision has one", tt.evaluated)
			}
			if accepted := tt.want.Subject != ""; accepted != (got.Claims != nil) {
				t.Errorf("token accepted: %v, claims: %v", accepted, got.Claims)
			}
		})
	}

	t.Run("input is built by the server, user never from the caller", func(t *testing.T) {
		_, err := rpc.Authorize(t.Context(), &authzv1.AuthorizeRequest{
			Token: viewer, Action: "orders:read", Resource: &authzv1.Resource{Id: "o-9"},
			Request: &authzv1.RequestInfo{
				Method: "get", Path: "/orders/o-9", Host: "shop.example",
				Query:   map[string]string{"expand": "lines"},
				Headers: map[string]string{"Authorization": "Bearer secret", "Cookie": "s=1", "X-Request-Id": "r-1"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		want := engine.Input{
			Action:   "orders:read",
			Resource: policy.Resource{Type: "orders", ID: "o-9"},
			Request: &policy.Request{Method: "GET", Path: "/orders/o-9", Host: "shop.example",
				Query: map[string]string{"expand": "lines"}, Headers: map[string]string{"x-request-id": "r-1"},
				// Set by the engine from the path, whatever the caller sent.
				CanonicalPath: "/orders/o-9"},
		}
		if diff := cmp.Diff(want, eng.last(t)); diff != "" {
			t.Errorf("engine input (-want +got):\n%s", diff)
		}
	})

	t.Run("rate limited", func(t *testing.T) {
		req := &authzv1.AuthorizeRequest{Token: limited, Action: "orders:read"}
		if _, err := rpc.Authorize(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		got, err := rpc.Authorize(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got.Allowed || got.Reason != "rate-limited" || got.RetryAfter.AsDuration() <= 0 {
			t.Errorf("second request of a 1 rpm tenant: allowed=%v reason=%q retry_after=%v", got.Allowed, got.Reason, got.RetryAfter)
		}
	})
}

func TestServerErrors(t *testing.T) {
	p := servertest.NewIDP(t)
	rpc := rpcClient(t, servertest.ServeGRPC(t, servertest.NewServer(t, servertest.NewEngine(t, p, func(c *config.Config) {
		c.Policy.Dir = "testdata/policy-conflict"
	}))))
	viewer := p.TokenFor(t, servertest.User("alice", "viewer"))

	tests := []struct {
		name   string
		req    *authzv1.AuthorizeRequest
		code   codes.Code
		reason string
	}{
		{name: "action missing", req: &authzv1.AuthorizeRequest{Token: viewer}, code: codes.InvalidArgument, reason: "input-invalid"},
		{name: "action with a control character", req: &authzv1.AuthorizeRequest{Token: viewer, Action: "orders:read\n"}, code: codes.InvalidArgument, reason: "input-invalid"},
		{name: "action too long", req: &authzv1.AuthorizeRequest{Token: viewer, Action: strings.Repeat("a", 300)}, code: codes.InvalidArgument, reason: "input-invalid"},
		{name: "header name not a token", req: &authzv1.AuthorizeRequest{Token: viewer, Action: "orders:read", Request: &authzv1.RequestInfo{Headers: map[string]string{"bad name": "v"}}}, code: codes.InvalidArgument, reason: "input-invalid"},
		{name: "policy cannot decide", req: &authzv1.AuthorizeRequest{Token: viewer, Action: "orders:read", Resource: &authzv1.Resource{Id: "conflict"}}, code: codes.Internal, reason: "policy-error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rpc.Authorize(t.Context(), tt.req)
			st := status.Convert(err)
			if st.Code() != tt.code {
				t.Fatalf("code %v, want %v (err %v)", st.Code(), tt.code, err)
			}
			var info *errdetails.ErrorInfo
			for _, d := range st.Details() {
				if i, ok := d.(*errdetails.ErrorInfo); ok {
					info = i
				}
			}
			if info.GetReason() != tt.reason || info.GetDomain() != authz.ErrorDomain {
				t.Errorf("ErrorInfo %v, want reason %q domain %q", info, tt.reason, authz.ErrorDomain)
			}
			if strings.Contains(st.Message(), viewer) {
				t.Error("the status message quotes the token")
			}
		})
	}

	t.Run("the same engine still decides other requests", func(t *testing.T) {
		got, err := rpc.Authorize(t.Context(), &authzv1.AuthorizeRequest{Token: viewer, Action: "orders:read", Resource: &authzv1.Resource{Id: "allowed"}})
		if err != nil || !got.Allowed {
			t.Fatalf("Authorize = %v, %v; want allowed", got, err)
		}
	})
}

func TestNewServerNeedsDecider(t *testing.T) {
	if _, err := server.New(nil, server.Options{}); err == nil {
		t.Fatal("NewServer(nil) succeeded")
	}
}

// TestServerResourceAttributes checks that resource attributes reach the
// policy over gRPC and HTTP, and that attributes over their bounds are a
// client error on both.
func TestServerResourceAttributes(t *testing.T) {
	p := servertest.NewIDP(t)
	eng := &spy{Decider: servertest.NewEngine(t, p, func(c *config.Config) {
		c.Policy.Dir = "testdata/resource-attributes"
	})}
	srv := servertest.NewServer(t, eng)
	rpc := rpcClient(t, servertest.ServeGRPC(t, srv))
	base := servertest.ServeHTTP(t, srv)
	alice := p.TokenFor(t, servertest.User("alice", "viewer"))

	for _, tt := range []struct {
		name  string
		attrs map[string]any
		allow bool
	}{
		{"owner", map[string]any{"owner": "alice", "status": "open"}, true},
		{"another owner", map[string]any{"owner": "bob", "status": "open"}, false},
		{"archived", map[string]any{"owner": "alice", "status": "archived"}, false},
		{"owner again", map[string]any{"owner": "alice", "status": "open"}, true},
		{"no attributes", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := &authzv1.Resource{Id: "o-1"}
			if tt.attrs != nil {
				res.Attributes = mustStruct(t, tt.attrs)
			}
			got, err := rpc.Authorize(t.Context(), &authzv1.AuthorizeRequest{Token: alice, Action: "orders:update", Resource: res})
			if err != nil || got.Allowed != tt.allow {
				t.Fatalf("gRPC Authorize = %v, %v; want allowed=%v", got, err, tt.allow)
			}
			if want, in := len(tt.attrs), eng.last(t).Resource.Attributes; len(in) != want {
				t.Errorf("engine saw attributes %v", in)
			}
			body, err := json.Marshal(map[string]any{"token": alice, "action": "orders:update",
				"resource": map[string]any{"id": "o-1", "attributes": tt.attrs}})
			if err != nil {
				t.Fatal(err)
			}
			reply := servertest.Post(t, http.MethodPost, base+authz.PathAuthorize, string(body), nil)
			var d struct{ Allowed bool }
			if reply.Status != http.StatusOK || json.Unmarshal(reply.Body, &d) != nil || d.Allowed != tt.allow {
				t.Fatalf("HTTP authorize = %d %s; want allowed=%v", reply.Status, reply.Body, tt.allow)
			}
		})
	}

	many := map[string]any{}
	for i := range authz.MaxAttributes + 1 {
		many[fmt.Sprintf("k%d", i)] = i
	}
	for _, tt := range []struct {
		name  string
		attrs map[string]any
	}{
		{"too many", many},
		{"key too long", map[string]any{strings.Repeat("k", authz.MaxAttributeKeyLen+1): "v"}},
		{"nested key too long", map[string]any{"m": map[string]any{strings.Repeat("k", authz.MaxAttributeKeyLen+1): "v"}}},
		{"key with a control character", map[string]any{"a\nb": "v"}},
		{"too deep", map[string]any{"a": map[string]any{"b": map[string]any{"c": []any{[]any{1}}}}}},
		{"too large", map[string]any{"a": strings.Repeat("x", authz.MaxAttributesSize)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rpc.Authorize(t.Context(), &authzv1.AuthorizeRequest{Token: alice, Action: "orders:update",
				Resource: &authzv1.Resource{Attributes: mustStruct(t, tt.attrs)}})
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "resource.attributes") {
				t.Errorf("gRPC: %v, want InvalidArgument naming resource.attributes", err)
			}
			body, err := json.Marshal(map[string]any{"token": alice, "action": "orders:update",
				"resource": map[string]any{"attributes": tt.attrs}})
			if err != nil {
				t.Fatal(err)
			}
			reply := servertest.Post(t, http.MethodPost, base+authz.PathAuthorize, string(body), nil)
			var e authz.ErrorBody
			if reply.Status != http.StatusBadRequest || json.Unmarshal(reply.Body, &e) != nil || e.Error.Code != string(reason.InputInvalid) {
				t.Errorf("HTTP: %d %s, want 400 input-invalid", reply.Status, reply.Body)
			}
		})
	}
	// At the bounds is fine.
	deep := map[string]any{"a": map[string]any{"b": map[string]any{"c": []any{"owner"}}}, "owner": "alice", "status": "open"}
	got, err := rpc.Authorize(t.Context(), &authzv1.AuthorizeRequest{Token: alice, Action: "orders:update",
		Resource: &authzv1.Resource{Attributes: mustStruct(t, deep)}})
	if err != nil || !got.Allowed {
		t.Fatalf("attributes 4 deep: %v, %v", got, err)
	}
}
