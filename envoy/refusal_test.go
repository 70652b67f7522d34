package envoy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
)

// A request refused before it could be decided (a path without a single
// meaning, a method the check cannot trust, an undecodable Check) is
// answered under a decision id, and audited under that id with the
// refusal's reason, on every surface: Envoy's Check, Envoy's
// http_service and the nginx and Caddy check.
func TestRefusalsAreRecorded(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp, config.FailClosed)
	e, sink := auditedEngine(t, idp, cfg, engine.Deps{})
	s := newTestServer(t, cfg, e)
	mux := http.NewServeMux()
	s.RegisterHTTP(mux)
	tok := idp.token(t, map[string]any{"sub": "u-1", "tenant_id": testTenant, "roles": []string{"viewer"}})
	bearer := "Bearer " + tok

	denied := func(t *testing.T, resp *authv3.CheckResponse) (int, DenyBody) {
		t.Helper()
		var body DenyBody
		if err := json.Unmarshal([]byte(resp.GetDeniedResponse().GetBody()), &body); err != nil {
			t.Fatalf("denied body: %v: %v", resp, err)
		}
		return int(resp.GetDeniedResponse().GetStatus().GetCode()), body
	}
	check := func(req *authv3.CheckRequest) func(t *testing.T) (int, DenyBody) {
		return func(t *testing.T) (int, DenyBody) {
			resp, err := s.Check(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			return denied(t, resp)
		}
	}
	undecodable := func(t *testing.T) (int, DenyBody) {
		a, err := s.undecodable(context.Background(), errors.New("not UTF-8"), nil)
		if err != nil {
			t.Fatal(err)
		}
		return denied(t, a.(*CheckAnswer).Response())
	}
	httpCheck := func(target string, headers map[string]string) func(t *testing.T) (int, DenyBody) {
		return func(t *testing.T) (int, DenyBody) {
			r := httptest.NewRequest(http.MethodGet, "/check", nil)
			if target != CheckPath {
				r = httptest.NewRequest(http.MethodGet, target, nil)
			}
			for k, v := range headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			mux.ServeHTTP(w, r)
			var body DenyBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("status %d, body %q: %v", w.Code, w.Body, err)
			}
			status := w.Code
			if st := w.Header().Get(HeaderStatus); st != "" {
				status = 0
				_ = json.Unmarshal([]byte(st), &status)
			}
			return status, body
		}
	}

	for _, c := range []struct {
		name   string
		answer func(t *testing.T) (int, DenyBody)
		source string
		want   reason.Code
	}{
		{"check encoded slash", check(checkReq("GET", "/api/orders/%2F1", map[string]string{"authorization": bearer}, nil)), SourceEnvoy, reason.PathInvalid},
		{"check path parameter", check(checkReq("GET", "/api/orders/1;x", map[string]string{"authorization": bearer}, nil)), SourceEnvoy, reason.PathInvalid},
		{"check bad escape", check(checkReq("GET", "/api/orders/%zz", map[string]string{"authorization": bearer}, nil)), SourceEnvoy, reason.PathInvalid},
		{"check method override", check(checkReq("POST", "/api/orders", map[string]string{"authorization": bearer, "x-http-method-override": "DELETE"}, nil)), SourceEnvoy, reason.InputInvalid},
		{"check without http attributes", check(&authv3.CheckRequest{}), SourceEnvoy, reason.InputInvalid},
		{"check undecodable", undecodable, SourceEnvoy, reason.InputInvalid},
		{"http_service encoded slash", httpCheck(EnvoyCheckPrefix+"/api/orders/%2F1", map[string]string{"Authorization": bearer}), SourceHTTPCheck, reason.PathInvalid},
		{"nginx encoded slash", httpCheck(CheckPath, map[string]string{"Authorization": bearer, "X-Original-URI": "/api/orders/%2F1", "X_Svc_Method": "GET"}), SourceHTTPCheck, reason.PathInvalid},
		{"nginx without method", httpCheck(CheckPath, map[string]string{"Authorization": bearer, "X-Original-URI": "/api/orders/1"}), SourceHTTPCheck, reason.MethodUntrusted},
		{"nginx method override", httpCheck(CheckPath, map[string]string{"Authorization": bearer, "X-Original-URI": "/api/orders/1", "X_Svc_Method": "GET", "X-HTTP-Method-Override": "DELETE"}), SourceHTTPCheck, reason.InputInvalid},
		{"caddy methods disagree", httpCheck(CheckPath, map[string]string{"Authorization": bearer, "X-Forwarded-Uri": "/api/orders/1", "X-Forwarded-Method": "GET", "X_Svc_Method": "DELETE"}), SourceHTTPCheck, reason.InputInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(sink.Records())
			status, body := c.answer(t)
			if status != http.StatusBadRequest || body.Reason != string(c.want) {
				t.Errorf("answer %d %q, want 400 %q", status, body.Reason, c.want)
			}
			if body.DecisionID == "" {
				t.Fatal("answer has no decision id")
			}
			recs := sink.Records()
			if len(recs) != before+1 {
				t.Fatalf("%d audit records for the refusal, want 1", len(recs)-before)
			}
			rec := recs[len(recs)-1]
			if rec.DecisionID != body.DecisionID || rec.Reason != string(c.want) || rec.Allow || rec.Source != c.source {
				t.Errorf("audit record %+v, want decision id %q, reason %q, denied, source %q", rec, body.DecisionID, c.want, c.source)
			}
		})
	}
}
