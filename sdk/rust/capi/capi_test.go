//go:build cgo

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/plan"
)

func writeConfig(t testing.TB, jwksURL, extra string) string {
	dir := t.TempDir()
	path := filepath.Join(dir, "svc.toml")
	cfg := fmt.Sprintf("[sdk]\ntenant_id = \"acme\"\nfail_mode = \"closed\"\njwks_url = %q\n[tenants.acme]\nplan = \"enterprise\"\n[log]\nlevel = \"error\"\n[audit]\ndestination = \"off\"\n%s", jwksURL, extra)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// openTestEngine opens an engine of writeConfig's configuration trusting a
// new IdP, closed when the test ends.
func openTestEngine(t *testing.T) (uint64, *idptest.IdP) {
	t.Helper()
	p := idptest.New(t)
	h, errDoc := abiOpen(writeConfig(t, p.JWKSURL(), ""), false)
	if h == 0 {
		t.Fatalf("open: %s", errDoc)
	}
	t.Cleanup(func() { abiClose(h) })
	return h, p
}

func TestABI(t *testing.T) {
	h, p := openTestEngine(t)
	tok := p.Token(t, idptest.Claims("user-1", "acme", "viewer"))

	var d struct {
		Allowed bool           `json:"allowed"`
		Reason  string         `json:"reason"`
		Subject string         `json:"subject"`
		Claims  map[string]any `json:"claims"`
	}
	if err := json.Unmarshal([]byte(abiValidate(h, tok)), &d); err != nil {
		t.Fatal(err)
	}
	if !d.Allowed || d.Reason != "ok" || d.Subject != "user-1" || d.Claims["tenant_id"] != "acme" {
		t.Errorf("validate = %+v", d)
	}

	var res struct {
		Token    struct{ Allowed bool }
		Decision struct {
			Allow       bool     `json:"allow"`
			DenyReasons []string `json:"deny_reasons"`
			Reason      string   `json:"reason"`
			DecisionID  string   `json:"decision_id"`
		}
	}
	if err := json.Unmarshal([]byte(abiAuthorize(h, tok, `{"action":"orders:delete"}`)), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Token.Allowed || res.Decision.Allow || res.Decision.Reason != "policy-deny" || res.Decision.DecisionID == "" ||
		len(res.Decision.DenyReasons) != 1 {
		t.Errorf("authorize = %+v", res)
	}

	// Resource attributes have the decision API's bounds.
	deep := `{"action":"orders:read","resource":{"attributes":{"a":[[[[1]]]]}}}`
	if got := abiAuthorize(h, tok, deep); !strings.Contains(got, `"reason":"input-invalid"`) || !strings.Contains(got, "resource.attributes") {
		t.Errorf("authorize with attributes 5 deep = %s", got)
	}
	if got := abiAuthorize(h, tok, `{"action":"orders:read","resource":{"attributes":{"owner":"u-1"}}}`); !strings.Contains(got, `"decision"`) {
		t.Errorf("authorize with attributes = %s", got)
	}

	if got := abiAuthorize(h, tok, `{"action":`); !strings.Contains(got, `"reason":"input-invalid"`) {
		t.Errorf("authorize of a truncated input = %s", got)
	}

	abiClose(h)
	if got := abiValidate(h, tok); !strings.HasPrefix(got, `{"error":{"reason":"engine-closed"`) {
		t.Errorf("validate after close = %s", got)
	}
	abiClose(h) // a second close does nothing
	abiClose(0)
}

func TestABIOpenErrors(t *testing.T) {
	tests := []struct{ name, path, want string }{
		{"missing file", "/nonexistent/svc.toml", "config-invalid"},
		{"bad extension", "svc.ini", "config-invalid"},
		{"no path", "", "config-invalid"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, errDoc := abiOpen(tc.path, false)
			var doc errorDoc
			if h != 0 || json.Unmarshal([]byte(errDoc), &doc) != nil || string(doc.Error.Reason) != tc.want {
				t.Errorf("open(%q) = %d, %s; want 0 and %s", tc.path, h, errDoc, tc.want)
			}
		})
	}
	// Variables are read as C sees them (lookupEnv): one applies over
	// the file and names itself in the error.
	p := idptest.New(t)
	path := writeConfig(t, p.JWKSURL(), "")
	lookup := func(k string) (string, bool) {
		if k == "SVC_FAIL_MODE" {
			return "sideways", true
		}
		return "", false
	}
	if _, err := openEngine(path, false, lookup); err == nil || !strings.Contains(err.Error(), "SVC_FAIL_MODE") {
		t.Errorf("open with SVC_FAIL_MODE=sideways: %v", err)
	}
}

// BenchmarkABIValidateToken measures a cached ValidateToken through the C
// ABI as the Rust crate calls it (svc_validate_token_fields) with the
// engine as Rust opens it (sidecar telemetry): compare with
// BenchmarkEngineValidateToken, the same engine called directly, and
// engine.BenchmarkValidateToken (no-op telemetry). The helper's own C
// allocations are counted too.
func BenchmarkABIValidateToken(b *testing.B) {
	h, tok := benchEngine(b)
	for b.Loop() {
		if r := abiValidateFields(h, tok); len(r) < fieldsHeader || r[0] != fieldsFormat || r[1] != 1 {
			b.Fatalf("%q", r)
		}
	}
}

func BenchmarkEngineValidateToken(b *testing.B) {
	h, tok := benchEngine(b)
	in, _ := lookup(h)
	ctx := context.Background()
	for b.Loop() {
		if d := in.eng.ValidateToken(ctx, tok); !d.Allowed {
			b.Fatal(d)
		}
	}
}

func benchEngine(b *testing.B) (uint64, string) {
	p := idptest.New(b)
	h, errDoc := abiOpen(writeConfig(b, p.JWKSURL(), "[rate_limit]\ndefault_rpm = 1099511627776\n"), false)
	if h == 0 {
		b.Fatal(errDoc)
	}
	b.Cleanup(func() { abiClose(h) })
	tok := p.Token(b, idptest.Claims("user-1", "acme", "viewer"))
	if r := abiValidate(h, tok); !strings.HasPrefix(r, `{"allowed":true`) {
		b.Fatal(r)
	}
	b.ReportAllocs()
	return h, tok
}

// TestTokenDecisionWire: the hand-written encoding is encoding/json's.
func TestTokenDecisionWire(t *testing.T) {
	var c claimsCache
	for _, d := range []engine.TokenDecision{
		{Allowed: true, Reason: "ok", Subject: "user-1", TenantID: "acme", Claims: map[string]any{"sub": "user-1", "n": json.Number("5"), "x": []any{"<&>"}}},
		{Reason: "token-expired", Message: "exp \"1\" <é>\n\x01"},
		{Allowed: true, Reason: "dev-anonymous", Subject: "anonymous"},
	} {
		want, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // encoded, then from the cache
			w, err := c.wire(d)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(w)
			if err != nil {
				t.Fatal(err)
			}
			var g, wnt map[string]any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			json.Unmarshal(want, &wnt)
			if !reflect.DeepEqual(g, wnt) {
				t.Errorf("wire encoding\n got %s\nwant %s", got, want)
			}
			claims, _ := json.Marshal(d.Claims)
			if !bytes.HasSuffix(got, append(append([]byte(`,"claims":`), claims...), '}')) || bytes.Count(got, []byte(`,"claims":`)) != 1 {
				t.Errorf("wire encoding %s: want the claims last, once", got)
			}
		}
	}
}

func TestABIPlanResources(t *testing.T) {
	h, p := openTestEngine(t)
	viewer := p.Token(t, idptest.Claims("user-1", "acme", "viewer"))

	var got planResult
	// A conditional plan is longer than the test's 256-byte buffer: it
	// comes back in malloc'd memory.
	ans := abiPlan(h, viewer, "orders:read", "orders", "sqlite")
	if err := json.Unmarshal([]byte(ans), &got); err != nil {
		t.Fatalf("%v: %s", err, ans)
	}
	if got.Kind != plan.Conditional || got.Condition == nil || got.Reason != "plan-conditional" ||
		got.Subject != "user-1" || got.DecisionID == "" || !strings.Contains(got.SQL.Where, "?") {
		t.Errorf("viewer's plan = %s", ans)
	}
	if len(got.SQL.Params) == 0 || got.SQL.Params[0] != "acme" {
		t.Errorf("params = %v, want the tenant", got.SQL.Params)
	}

	for _, tc := range []struct{ name, token, action, dialect, kind, reason string }{
		{"no role grants it", viewer, "orders:delete", "", "always_denied", ""},
		{"a refused token", "not-a-token", "orders:read", "postgres", "always_denied", "token-malformed"},
	} {
		ans := abiPlan(h, tc.token, tc.action, "orders", tc.dialect)
		var got planResult
		if err := json.Unmarshal([]byte(ans), &got); err != nil {
			t.Fatalf("%s: %v: %s", tc.name, err, ans)
		}
		if string(got.Kind) != tc.kind || got.SQL.Where != plan.WhereFalse || got.Condition != nil ||
			(tc.reason != "" && string(got.Reason) != tc.reason) || got.SQL.Params == nil {
			t.Errorf("%s: %s", tc.name, ans)
		}
	}

	for _, tc := range []struct{ name, action, dialect string }{
		{"no action", "", "sqlite"},
		{"an unknown dialect", "orders:read", "oracle"},
		{"a name too long", strings.Repeat("a", maxNameBytes+1), "sqlite"},
	} {
		ans := abiPlan(h, viewer, tc.action, "orders", tc.dialect)
		if !strings.HasPrefix(ans, `{"error":{"reason":"input-`) {
			t.Errorf("%s: %s", tc.name, ans)
		}
	}
}

// TestSpansWithEndpoint: an engine opened with an OTLP endpoint exports
// its spans, the token verification's among them. (Without one it takes
// a no-op tracer: no span of it could reach anyone.)
func TestSpansWithEndpoint(t *testing.T) {
	p := idptest.New(t)
	path := writeConfig(t, p.JWKSURL(), "")
	tok := p.Token(t, idptest.Claims("user-1", "acme", "viewer"))
	otlp := harness.StartOTLPReceiver(t)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.Endpoint}
	h, err := openEngine(path, false, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	in, _ := lookup(h)
	if d := in.eng.ValidateToken(t.Context(), tok); !d.Allowed {
		t.Fatalf("validate: %+v", d)
	}
	closeEngine(h) // flushes the spans
	if len(otlp.SpansNamed(engine.SpanVerifyToken)) == 0 {
		t.Errorf("no %s span exported; got %v", engine.SpanVerifyToken, otlp.Spans())
	}
}
