package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/svc-dev/svc/internal/harness"
)

// TestSidecarEndpoints checks the sidecar's operational surface: health,
// readiness, metrics, status, gRPC health and reflection, the JSON API,
// and its logs.
func TestSidecarEndpoints(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	viewer := k.token(t, "alice", "acme", "viewer")

	t.Run("healthz and readyz", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz"} {
			if status, h, body := harness.Get(t, s.URL(p)); status != http.StatusOK {
				t.Errorf("GET %s: %s", p, harness.Describe(status, h, body))
			}
		}
	})

	t.Run("status", func(t *testing.T) {
		status, h, body := harness.Get(t, s.URL("/v1/status"))
		if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
			t.Fatalf("GET /v1/status: %s", harness.Describe(status, h, body))
		}
		var st map[string]any
		if err := json.Unmarshal(body, &st); err != nil {
			t.Fatalf("status is not a JSON object: %v: %s", err, body)
		}
		if v, _ := st["version"].(string); !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(v) {
			t.Errorf("status version = %v, want a dotted version; status %s", st["version"], body)
		}
		if !strings.Contains(string(body), `"acme"`) {
			t.Errorf("status does not name the tenant acme: %s", body)
		}
	})

	t.Run("JSON API", func(t *testing.T) {
		tests := []struct {
			name, path, body, auth string
			want                   map[string]any
		}{
			{"validate-token with the token in the body", "/v1/validate-token", `{"token":"` + viewer + `"}`, "",
				map[string]any{"allowed": true, "reason": "ok", "subject": "alice", "tenant_id": "acme"}},
			{"validate-token with the Authorization header", "/v1/validate-token", `{}`, viewer,
				map[string]any{"allowed": true, "reason": "ok", "subject": "alice"}},
			{"validate-token of garbage", "/v1/validate-token", `{"token":"garbage"}`, "",
				map[string]any{"reason": "token-malformed"}},
			{"authorize allowed", "/v1/authorize", `{"action":"orders:read","resource":{"id":"42"}}`, viewer,
				map[string]any{"allowed": true, "reason": "policy-allow", "subject": "alice"}},
			{"authorize denied", "/v1/authorize", `{"action":"orders:delete"}`, viewer,
				map[string]any{"reason": "policy-deny"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				req, err := http.NewRequest(http.MethodPost, s.URL(tc.path), strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				if tc.auth != "" {
					req.Header.Set("Authorization", "Bearer "+tc.auth)
				}
				status, h, body := harness.Do(t, req)
				if status != http.StatusOK {
					t.Fatalf("POST %s: %s", tc.path, harness.Describe(status, h, body))
				}
				var got map[string]any
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatalf("answer is not JSON: %v: %s", err, body)
				}
				for f, v := range tc.want {
					if got[f] != v {
						t.Errorf("%s = %v, want %v; answer %s", f, got[f], v, body)
					}
				}
				if allowed, _ := got["allowed"].(bool); !allowed {
					return
				}
				if strings.HasSuffix(tc.path, "authorize") && got["decision_id"] == nil {
					t.Errorf("authorize answer lacks decision_id: %s", body)
				}
			})
		}
		t.Run("denied answer lists deny_reasons", func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, s.URL("/v1/authorize"), strings.NewReader(`{"action":"orders:delete"}`))
			req.Header.Set("Authorization", "Bearer "+viewer)
			_, _, body := harness.Do(t, req)
			var got struct {
				DenyReasons []string `json:"deny_reasons"`
				DecisionID  string   `json:"decision_id"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if !hasReason(got.DenyReasons, "role-forbidden") || got.DecisionID == "" {
				t.Errorf("answer = %s, want deny_reasons with role-forbidden and a decision_id", body)
			}
		})
		t.Run("malformed JSON is a client error", func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, s.URL("/v1/authorize"), strings.NewReader(`{"action":`))
			if status, h, body := harness.Do(t, req); status != http.StatusBadRequest {
				t.Errorf("got %s, want 400", harness.Describe(status, h, body))
			}
		})
	})

	t.Run("metrics", func(t *testing.T) {
		status, h, body := harness.Get(t, s.URL("/metrics"))
		if status != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
			t.Fatalf("GET /metrics: %s", harness.Describe(status, h, body))
		}
		// The JSON API calls above made decisions.
		if !strings.Contains(string(body), "svc_decisions") {
			t.Errorf("/metrics has no svc_decisions series:\n%s", clipText(string(body), 2000))
		}
	})

	t.Run("gRPC health", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		resp, err := grpc_health_v1.NewHealthClient(s.Conn(t)).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		if err != nil {
			t.Fatalf("health Check: %v", err)
		}
		if resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
			t.Errorf("health = %v, want SERVING", resp.GetStatus())
		}
	})

	t.Run("gRPC reflection lists the services", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
		defer cancel()
		stream, err := reflectionv1.NewServerReflectionClient(s.Conn(t)).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatalf("reflection: %v", err)
		}
		if err := stream.Send(&reflectionv1.ServerReflectionRequest{
			MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{},
		}); err != nil {
			t.Fatalf("reflection send: %v", err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("reflection recv: %v", err)
		}
		_ = stream.CloseSend()
		var names []string
		for _, svc := range resp.GetListServicesResponse().GetService() {
			names = append(names, svc.GetName())
		}
		for _, want := range []string{"envoy.service.auth.v3.Authorization", "svc.authz.v1.AuthzService", "grpc.health.v1.Health"} {
			if !slices.Contains(names, want) {
				t.Errorf("reflection lists %v, want %s among them", names, want)
			}
		}
	})

	t.Run("logs are JSON lines without secrets", func(t *testing.T) {
		recs := s.LogRecords(t)
		if len(recs) == 0 {
			t.Fatal("the sidecar logged nothing at level debug")
		}
		for i, r := range recs {
			if r["level"] == nil || r["msg"] == nil {
				t.Errorf("log line %d lacks level or msg: %v", i+1, r)
			}
		}
		if strings.Contains(s.Stderr.String(), viewer) {
			t.Error("a token appears in the log")
		}
	})
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
