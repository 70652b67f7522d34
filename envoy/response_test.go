package envoy

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/reason"
)

func meta(decisionID, subject, tenant string, rc reason.Code) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{
		"decision_id": structpb.NewStringValue(decisionID),
		"subject":     structpb.NewStringValue(subject),
		"tenant_id":   structpb.NewStringValue(tenant),
		"reason":      structpb.NewStringValue(string(rc)),
	}}
}

func deniedResp(code codes.Code, status typev3.StatusCode, rc reason.Code, body string, md *structpb.Struct, extra ...*corev3.HeaderValueOption) *authv3.CheckResponse {
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(code), Message: string(rc)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: status},
			Headers: append([]*corev3.HeaderValueOption{setHeader("content-type", "application/json")}, extra...),
			Body:    body,
		}},
		DynamicMetadata: md,
	}
}

// refusedCredential is the engine's result for a credential refused
// with rc, before any policy ran.
func refusedCredential(rc reason.Code) engine.Result {
	return engine.Result{
		Token:    engine.TokenDecision{Reason: rc},
		Decision: engine.Decision{Reason: rc, DenyReasons: []string{}},
	}
}

// challenged is the 401 answer to a request whose credential was refused
// with rc: body, no decision or user in the metadata, and the
// WWW-Authenticate challenge.
func challenged(rc reason.Code, body, challenge string) *authv3.CheckResponse {
	return deniedResp(codes.Unauthenticated, typev3.StatusCode_Unauthorized, rc, body,
		meta("", "", "", rc), setHeader("www-authenticate", challenge))
}

// allowedResp is the OK answer to an allowed request: the identity
// headers of userID, tenant and roles and the decision's id, the
// fail-open header removed, and the metadata of the decision.
func allowedResp(userID, tenant, roles, decisionID string) *authv3.CheckResponse {
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(codes.OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers: []*corev3.HeaderValueOption{
				setHeader(HeaderUserID, userID),
				setHeader(HeaderTenantID, tenant),
				setHeader(HeaderRoles, roles),
				setHeader(HeaderDecisionID, decisionID),
			},
			HeadersToRemove: []string{HeaderFailOpen},
		}},
		DynamicMetadata: meta(decisionID, userID, tenant, reason.PolicyAllow),
	}
}

func allowedResult(sub, tenant string, roles []string, decisionID string) engine.Result {
	return engine.Result{
		Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: sub, TenantID: tenant},
		Decision: engine.Decision{Allow: true, DenyReasons: []string{}, DecisionID: decisionID, Reason: reason.PolicyAllow},
		Input:    engine.Input{User: policy.User{ID: sub, TenantID: tenant, Roles: roles}},
	}
}

func TestCheckResponse(t *testing.T) {
	errPolicy := fmt.Errorf("authorize: %w", reason.New(reason.PolicyError, "policy evaluation failed"))
	tests := []struct {
		name string
		res  engine.Result
		err  error
		want *authv3.CheckResponse
	}{
		{
			name: "allow sets identity headers and removes fail-open",
			res:  allowedResult("user-1", "acme", []string{"editor", "billing"}, "dec-1"),
			want: allowedResp("user-1", "acme", "editor,billing", "dec-1"),
		},
		{
			name: "development mode allow",
			res: engine.Result{
				Token:    engine.TokenDecision{Allowed: true, Reason: reason.DevAnonymous, Subject: engine.AnonymousSubject, TenantID: "acme"},
				Decision: engine.Decision{Allow: true, DecisionID: "dec-2", Reason: reason.PolicyAllow},
				Input:    engine.Input{User: policy.User{ID: engine.AnonymousSubject, TenantID: "acme", Roles: []string{}}},
			},
			want: allowedResp("anonymous", "acme", "", "dec-2"),
		},
		{
			name: "claims cannot inject header lines",
			res:  allowedResult("evil\r\nx-admin: 1", "ac\x00me", []string{"a\nb"}, "dec-3"),
			want: allowedResp("evilx-admin: 1", "acme", "a%0Ab", "dec-3"),
		},
		{
			name: "expired token is 401 invalid_token",
			res:  refusedCredential(reason.TokenExpired),
			want: challenged(reason.TokenExpired, `{"allow":false,"deny_reasons":[],"reason":"token-expired","decision_id":""}`,
				`Bearer error="invalid_token", error_description="token-expired"`),
		},
		{
			name: "revoked API key is 401 challenged as ApiKey",
			res:  refusedCredential(reason.APIKeyRevoked),
			want: challenged(reason.APIKeyRevoked, `{"allow":false,"deny_reasons":[],"reason":"api-key-revoked","decision_id":""}`,
				`ApiKey error="invalid_key", error_description="api-key-revoked"`),
		},
		{
			name: "missing token is a bare bearer challenge",
			res:  engine.Result{Token: engine.TokenDecision{Reason: reason.TokenMissing}},
			want: challenged(reason.TokenMissing, `{"allow":false,"deny_reasons":[],"reason":"token-missing","decision_id":""}`,
				"Bearer"),
		},
		{
			name: "policy deny is 403 with reasons",
			res: engine.Result{
				Token: engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "user-1", TenantID: "acme"},
				Decision: engine.Decision{DecisionID: "dec-4", Reason: reason.PolicyDeny,
					DenyReasons: []string{"role-forbidden: viewer cannot orders:delete", "tenant-mismatch"}},
			},
			want: deniedResp(codes.PermissionDenied, typev3.StatusCode_Forbidden, reason.PolicyDeny,
				`{"allow":false,"deny_reasons":["role-forbidden: viewer cannot orders:delete","tenant-mismatch"],"reason":"policy-deny","decision_id":"dec-4"}`,
				meta("dec-4", "user-1", "acme", reason.PolicyDeny)),
		},
		{
			name: "rate limited is 429 with retry-after rounded up",
			res: engine.Result{
				Token: engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "user-1", TenantID: "acme"},
				Decision: engine.Decision{Reason: reason.RateLimited, DenyReasons: []string{"rate-limited"},
					RetryAfter: 1200 * time.Millisecond},
			},
			want: deniedResp(codes.ResourceExhausted, typev3.StatusCode_TooManyRequests, reason.RateLimited,
				`{"allow":false,"deny_reasons":["rate-limited"],"reason":"rate-limited","decision_id":""}`,
				meta("", "user-1", "acme", reason.RateLimited),
				setHeader("retry-after", "2")),
		},
		{
			name: "rate limited without a wait still says one second",
			res: engine.Result{
				Token:    engine.TokenDecision{Allowed: true, Reason: reason.OK, Subject: "u", TenantID: "acme"},
				Decision: engine.Decision{Reason: reason.RateLimited, DenyReasons: []string{"rate-limited"}},
			},
			want: deniedResp(codes.ResourceExhausted, typev3.StatusCode_TooManyRequests, reason.RateLimited,
				`{"allow":false,"deny_reasons":["rate-limited"],"reason":"rate-limited","decision_id":""}`,
				meta("", "u", "acme", reason.RateLimited),
				setHeader("retry-after", "1")),
		},
		{
			name: "engine cannot decide, fail closed is 500",
			res:  engine.Result{Decision: engine.Decision{Reason: reason.PolicyError, DecisionID: "dec-5"}},
			err:  errPolicy,
			want: deniedResp(codes.Internal, typev3.StatusCode_InternalServerError, reason.PolicyError,
				`{"allow":false,"deny_reasons":[],"reason":"policy-error","decision_id":"dec-5"}`,
				meta("dec-5", "", "", reason.PolicyError)),
		},
		{
			name: "uncoded error counts as policy error",
			err:  errors.New("boom"),
			want: deniedResp(codes.Internal, typev3.StatusCode_InternalServerError, reason.PolicyError,
				`{"allow":false,"deny_reasons":[],"reason":"policy-error","decision_id":""}`,
				meta("", "", "", reason.PolicyError)),
		},
		{
			// Fail open is Envoy's failure_mode_allow, for a sidecar it
			// cannot reach: an answered evaluation error is a denial.
			name: "engine cannot decide, fail open is 500 too",
			res:  engine.Result{Token: engine.TokenDecision{Allowed: true, Subject: "user-1", TenantID: "acme"}, Decision: engine.Decision{DecisionID: "d-9"}},
			err:  errPolicy,
			want: deniedResp(codes.Internal, typev3.StatusCode_InternalServerError, reason.PolicyError,
				`{"allow":false,"deny_reasons":[],"reason":"policy-error","decision_id":"d-9"}`,
				meta("d-9", "", "", reason.PolicyError)),
		},
		{
			name: "unreachable identity provider is 503 even when open",
			res:  engine.Result{Token: engine.TokenDecision{Reason: reason.JWKSUnavailable}},
			want: deniedResp(codes.Unavailable, typev3.StatusCode_ServiceUnavailable, reason.JWKSUnavailable,
				`{"allow":false,"deny_reasons":[],"reason":"jwks-unavailable","decision_id":""}`,
				meta("", "", "", reason.JWKSUnavailable)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckResponse(tt.res, tt.err)
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("CheckResponse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSpoofedHeaders(t *testing.T) {
	in := map[string]string{
		"x-svc-user-id": "admin", "x-svc-admin": "1", "X-Svc-Role": "root", "x-svc-": "",
		"x-svc-fail-open": "true", "accept": "*/*", "X-Svc-Identity": "forged",
	}
	for _, tc := range []struct {
		name     string
		identity bool
		want     []string
	}{
		{"without an identity token", false, []string{"x-svc-admin", "x-svc-identity", "x-svc-role"}},
		{"with an identity token, which overwrites the client's", true, []string{"x-svc-admin", "x-svc-role"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, spoofedHeaders(in, tc.identity)); diff != "" {
				t.Errorf("spoofedHeaders (-want +got):\n%s", diff)
			}
		})
	}
}

func TestASCIIJSON(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"ascii unchanged", `{"a":"b"}`, `{"a":"b"}`},
		{"latin", `{"a":"café"}`, `{"a":"caf\u00e9"}`},
		{"astral pair", `["😀"]`, `["\ud83d\ude00"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := asciiJSON([]byte(tt.in)); got != tt.want {
				t.Errorf("asciiJSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// TestRolesHeader checks that x-svc-roles carries exactly the roles of the
// token: a comma inside a role must not forge a second one upstream.
func TestRolesHeader(t *testing.T) {
	tests := []struct {
		name  string
		roles []string
		want  string
	}{
		{"plain roles unchanged", []string{"viewer", "billing:read", "org/admin", "ünï"}, "viewer,billing:read,org/admin,ünï"},
		{"none", nil, ""},
		{"comma inside a role", []string{"viewer", "x,admin"}, "viewer,x%2Cadmin"},
		{"quote", []string{`a"b`}, "a%22b"},
		{"percent", []string{"100%"}, "100%25"},
		{"spaces an upstream would trim", []string{" admin", "Billing Admin"}, "%20admin,Billing%20Admin"},
		{"control characters", []string{"a\r\nx-svc-user-id: root"}, "a%0D%0Ax-svc-user-id:%20root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := CheckResponse(allowedResult("u", "acme", tt.roles, "d"), nil)
			var got string
			for _, h := range resp.GetOkResponse().GetHeaders() {
				if h.GetHeader().GetKey() == HeaderRoles {
					got = h.GetHeader().GetValue()
				}
			}
			if got != tt.want {
				t.Fatalf("%s = %q, want %q", HeaderRoles, got, tt.want)
			}
			// An upstream splitting on "," and percent-decoding each item
			// gets the roles back.
			var back []string
			if got != "" {
				for _, item := range strings.Split(got, ",") {
					r, err := url.PathUnescape(item)
					if err != nil {
						t.Fatal(err)
					}
					back = append(back, r)
				}
			}
			if len(tt.roles) > 0 && !slices.Equal(back, tt.roles) {
				t.Fatalf("decoded %q, want %q", back, tt.roles)
			}
		})
	}
}
