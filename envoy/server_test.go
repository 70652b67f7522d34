package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// summary is what a test asserts about a CheckResponse; the decision id is
// random, so only its presence is kept.
type summary struct {
	Code        codes.Code
	HTTPStatus  int               // 200 for OK
	Headers     map[string]string // upstream headers (OK) or response headers (denied)
	Remove      []string
	Body        *DenyBody
	HasDecision bool
	Meta        map[string]string
}

func summarize(t *testing.T, resp *authv3.CheckResponse) summary {
	t.Helper()
	s := summary{Code: codes.Code(resp.GetStatus().GetCode()), Headers: map[string]string{}, Meta: map[string]string{}}
	for k, v := range resp.GetDynamicMetadata().GetFields() {
		s.Meta[k] = v.GetStringValue()
	}
	s.HasDecision = s.Meta["decision_id"] != ""
	delete(s.Meta, "decision_id")
	if ok := resp.GetOkResponse(); ok != nil {
		s.HTTPStatus = 200
		for _, h := range ok.GetHeaders() {
			s.Headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		s.Remove = ok.GetHeadersToRemove()
		if s.Headers[HeaderDecisionID] != "" {
			s.Headers[HeaderDecisionID] = "<set>"
		}
		return s
	}
	d := resp.GetDeniedResponse()
	if d == nil {
		t.Fatalf("response has neither ok nor denied part: %v", resp)
	}
	s.HTTPStatus = int(d.GetStatus().GetCode())
	for _, h := range d.GetHeaders() {
		s.Headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	var b DenyBody
	if err := json.Unmarshal([]byte(d.GetBody()), &b); err != nil {
		t.Fatalf("deny body %q: %v", d.GetBody(), err)
	}
	b.DecisionID = ""
	s.Body = &b
	return s
}

var jsonCT = map[string]string{"content-type": "application/json"}

func with(m map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestCheckOverGRPC(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp, config.FailClosed)
	client := serveGRPC(t, newTestServer(t, cfg, newTestEngine(t, cfg, idp)))

	admin := idp.token(t, map[string]any{"sub": "u-admin", "tenant_id": testTenant, "roles": []string{"admin", "viewer"}})
	viewer := idp.token(t, map[string]any{"sub": "u-viewer", "tenant_id": testTenant, "role": "viewer"})
	other := idp.token(t, map[string]any{"sub": "u-other", "tenant_id": "globex", "role": "admin"})
	expired := idp.token(t, map[string]any{"tenant_id": testTenant, "role": "admin",
		"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()})

	tests := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		ext     map[string]string
		want    summary
	}{
		{
			name: "admin delete allowed with identity headers and spoofed header removed", method: "DELETE", path: "/api/orders/1",
			headers: map[string]string{"authorization": "Bearer " + admin, "x-svc-user-id": "root", "x-svc-admin": "yes"},
			want: summary{Code: codes.OK, HTTPStatus: 200,
				Headers: map[string]string{HeaderUserID: "u-admin", HeaderTenantID: testTenant, HeaderRoles: "admin,viewer", HeaderDecisionID: "<set>"},
				Remove:  []string{HeaderFailOpen, "x-svc-admin"}, HasDecision: true,
				Meta: map[string]string{"subject": "u-admin", "tenant_id": testTenant, "reason": string(reason.PolicyAllow)}},
		},
		{
			name: "viewer read allowed", method: "GET", path: "/api/orders/1",
			headers: map[string]string{"authorization": "bearer " + viewer},
			want: summary{Code: codes.OK, HTTPStatus: 200,
				Headers: map[string]string{HeaderUserID: "u-viewer", HeaderTenantID: testTenant, HeaderRoles: "viewer", HeaderDecisionID: "<set>"},
				Remove:  []string{HeaderFailOpen}, HasDecision: true,
				Meta: map[string]string{"subject": "u-viewer", "tenant_id": testTenant, "reason": string(reason.PolicyAllow)}},
		},
		{
			name: "viewer delete denied by policy", method: "DELETE", path: "/api/orders/1",
			headers: map[string]string{"authorization": "Bearer " + viewer},
			want: summary{Code: codes.PermissionDenied, HTTPStatus: 403, Headers: jsonCT, HasDecision: true,
				Body: &DenyBody{DenyReasons: []string{"role-forbidden: viewer cannot orders:delete"}, Reason: string(reason.PolicyDeny)},
				Meta: map[string]string{"subject": "u-viewer", "tenant_id": testTenant, "reason": string(reason.PolicyDeny)}},
		},
		{
			name: "context extension action decides", method: "GET", path: "/api/reports/1",
			headers: map[string]string{"authorization": "Bearer " + viewer},
			ext:     map[string]string{ExtAction: "reports:export"},
			want: summary{Code: codes.PermissionDenied, HTTPStatus: 403, Headers: jsonCT, HasDecision: true,
				Body: &DenyBody{DenyReasons: []string{"role-forbidden: viewer cannot reports:export"}, Reason: string(reason.PolicyDeny)},
				Meta: map[string]string{"subject": "u-viewer", "tenant_id": testTenant, "reason": string(reason.PolicyDeny)}},
		},
		{
			name: "token of another tenant denied", method: "GET", path: "/api/orders/1",
			headers: map[string]string{"authorization": "Bearer " + other},
			want: summary{Code: codes.PermissionDenied, HTTPStatus: 403, Headers: jsonCT, HasDecision: true,
				Body: &DenyBody{DenyReasons: []string{"tenant-mismatch"}, Reason: string(reason.PolicyDeny)},
				Meta: map[string]string{"subject": "u-other", "tenant_id": "globex", "reason": string(reason.PolicyDeny)}},
		},
		{
			name: "no token is 401", method: "GET", path: "/api/orders/1",
			want: summary{Code: codes.Unauthenticated, HTTPStatus: 401, Headers: with(jsonCT, "www-authenticate", "Bearer"),
				Body:        &DenyBody{DenyReasons: []string{}, Reason: string(reason.TokenMissing)},
				HasDecision: true,
				Meta:        map[string]string{"subject": "", "tenant_id": "", "reason": string(reason.TokenMissing)}},
		},
		{
			name: "expired token is 401", method: "GET", path: "/api/orders/1",
			headers: map[string]string{"authorization": "Bearer " + expired},
			want: summary{Code: codes.Unauthenticated, HTTPStatus: 401,
				Headers:     with(jsonCT, "www-authenticate", `Bearer error="invalid_token", error_description="token-expired"`),
				Body:        &DenyBody{DenyReasons: []string{}, Reason: string(reason.TokenExpired)},
				HasDecision: true,
				Meta:        map[string]string{"subject": "", "tenant_id": "", "reason": string(reason.TokenExpired)}},
		},
		{
			name: "garbage token is 401", method: "GET", path: "/api/orders/1",
			headers: map[string]string{"authorization": "Bearer not.a.jwt"},
			want: summary{Code: codes.Unauthenticated, HTTPStatus: 401,
				Headers:     with(jsonCT, "www-authenticate", `Bearer error="invalid_token", error_description="token-malformed"`),
				Body:        &DenyBody{DenyReasons: []string{}, Reason: string(reason.TokenMalformed)},
				HasDecision: true,
				Meta:        map[string]string{"subject": "", "tenant_id": "", "reason": string(reason.TokenMalformed)}},
		},
		{
			name: "undecodable path is 400", method: "GET", path: "/api/orders/%zz",
			headers: map[string]string{"authorization": "Bearer " + admin},
			want: summary{Code: codes.InvalidArgument, HTTPStatus: 400, Headers: jsonCT,
				Body: &DenyBody{DenyReasons: []string{}, Reason: string(reason.PathInvalid)}, HasDecision: true,
				Meta: map[string]string{"subject": "", "tenant_id": "", "reason": string(reason.PathInvalid)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.Check(t.Context(), checkReq(tt.method, tt.path, tt.headers, tt.ext))
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if diff := cmp.Diff(tt.want, summarize(t, resp), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("no http attributes is 400 not a gRPC error", func(t *testing.T) {
		resp, err := client.Check(t.Context(), &authv3.CheckRequest{})
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		got := summarize(t, resp)
		if got.HTTPStatus != 400 || got.Body.Reason != string(reason.InputInvalid) {
			t.Fatalf("got %+v", got)
		}
	})
}

func TestCheckRateLimited(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp, config.FailClosed)
	cfg.RateLimit.PerTenant = map[string]int{testTenant: 1}
	client := serveGRPC(t, newTestServer(t, cfg, newTestEngine(t, cfg, idp)))
	tok := idp.token(t, map[string]any{"tenant_id": testTenant, "role": "admin"})
	r := checkReq("GET", "/api/orders/1", map[string]string{"authorization": "Bearer " + tok}, nil)

	first, err := client.Check(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if got := summarize(t, first); got.HTTPStatus != 200 {
		t.Fatalf("first request: %+v", got)
	}
	second, err := client.Check(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	got := summarize(t, second)
	want := summary{Code: codes.ResourceExhausted, HTTPStatus: 429,
		Headers:     with(jsonCT, "retry-after", got.Headers["retry-after"]),
		Body:        &DenyBody{DenyReasons: []string{string(reason.RateLimited)}, Reason: string(reason.RateLimited)},
		HasDecision: true,
		Meta:        map[string]string{"subject": "user-1", "tenant_id": testTenant, "reason": string(reason.RateLimited)}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	// One request a minute: the bucket refills in about 60 s.
	if ra := got.Headers["retry-after"]; ra != "60" && ra != "59" {
		t.Errorf("retry-after = %q, want about 60", ra)
	}
}

// conflictPolicy makes the engine fail to decide for resource type
// "boom": allow is a complete rule with two values.
const conflictPolicy = `package svc.authz

default allow := false

allow := true if input.resource.type == "boom"

allow := false if input.resource.type == "boom"

deny_reasons := set()
`

func TestCheckFailModes(t *testing.T) {
	dir := t.TempDir()
	testkit.WriteFile(t, filepath.Join(dir, "authz.rego"), []byte(conflictPolicy))
	idp := newTestIdP(t)
	tok := idp.token(t, map[string]any{"tenant_id": testTenant, "role": "admin"})
	tests := []struct {
		name     string
		failMode string
		want     summary
	}{
		{
			name: "closed", failMode: config.FailClosed,
			want: summary{Code: codes.Internal, HTTPStatus: 500, Headers: jsonCT,
				Body:        &DenyBody{DenyReasons: []string{}, Reason: string(reason.PolicyError)},
				HasDecision: true, // a failed evaluation still has an id to correlate with logs
				Meta:        map[string]string{"subject": "", "tenant_id": "", "reason": string(reason.PolicyError)}},
		},
		{
			// The sidecar answered: fail open is Envoy's, for a sidecar it
			// cannot reach, never for an evaluation error.
			name: "open", failMode: config.FailOpen,
			want: summary{Code: codes.Internal, HTTPStatus: 500, Headers: jsonCT,
				Body:        &DenyBody{DenyReasons: []string{}, Reason: string(reason.PolicyError)},
				HasDecision: true,
				Meta:        map[string]string{"subject": "", "tenant_id": "", "reason": string(reason.PolicyError)}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(idp, tt.failMode)
			cfg.Policy.Dir = dir
			client := serveGRPC(t, newTestServer(t, cfg, newTestEngine(t, cfg, idp)))
			resp, err := client.Check(t.Context(), checkReq("GET", "/boom/1", map[string]string{"authorization": "Bearer " + tok}, nil))
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if diff := cmp.Diff(tt.want, summarize(t, resp), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckDevelopmentMode(t *testing.T) {
	var cfg config.Config
	cfg.SDK.TenantID = testTenant
	cfg.Audit.Destination = config.AuditOff
	e := newTestEngine(t, cfg, nil)
	if !e.DevMode() {
		t.Fatal("engine not in development mode")
	}
	client := serveGRPC(t, newTestServer(t, cfg, e))
	resp, err := client.Check(t.Context(), checkReq("GET", "/orders/1", map[string]string{"authorization": "Bearer anything"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	// The anonymous subject has no role, so the default policy denies.
	want := summary{Code: codes.PermissionDenied, HTTPStatus: 403, Headers: jsonCT, HasDecision: true,
		Body: &DenyBody{DenyReasons: []string{"no-role"}, Reason: string(reason.PolicyDeny)},
		Meta: map[string]string{"subject": engine.AnonymousSubject, "tenant_id": testTenant, "reason": string(reason.PolicyDeny)}}
	if diff := cmp.Diff(want, summarize(t, resp), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestNewRejects(t *testing.T) {
	ok := authorizerFunc(func(context.Context, engine.Request) (engine.Result, error) { return engine.Result{}, nil })
	tests := []struct {
		name string
		cfg  config.Config
		az   Authorizer
	}{
		{"nil authorizer", config.Config{}, nil},
		{"bad route", config.Config{Sidecar: config.Sidecar{Routes: []config.Route{{Path: "/a/{"}}}}, ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg, tt.az, Deps{}); err == nil {
				t.Fatal("New succeeded")
			}
		})
	}
}

// TestServerLogsCodesNotErrors checks that what a client sent never
// reaches the log through an error: an engine error may quote input
// values (an OPA evaluation error quotes the operands), a refused path is
// the client's own text.
func TestServerLogsCodesNotErrors(t *testing.T) {
	const secret = "s3cr3t-input-value"
	failing := authorizerFunc(func(context.Context, engine.Request) (engine.Result, error) {
		return engine.Result{}, reason.Wrap(reason.PolicyError, errors.New(`eval_type_error: to_number: invalid syntax "`+secret+`"`), "policy evaluation failed")
	})
	var buf strings.Builder
	var cfg config.Config
	cfg.SDK.TenantID = testTenant
	s, err := New(cfg, failing, Deps{Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Check(ctx, checkReq("GET", "/orders/"+secret, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Check(ctx, checkReq("GET", "/orders/"+secret+"%zz", nil, nil)); err != nil {
		t.Fatal(err)
	}
	log := buf.String()
	if strings.Contains(log, secret) {
		t.Fatalf("the log quotes the request:\n%s", log)
	}
	for _, code := range []reason.Code{reason.PolicyError, reason.PathInvalid} {
		if !strings.Contains(log, `"reason":"`+string(code)+`"`) {
			t.Errorf("the log lacks reason %s:\n%s", code, log)
		}
	}
}
