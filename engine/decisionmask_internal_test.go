package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
)

// Credentials a caller may send in a request; none may reach a record.
const (
	rawBearer = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1c2VyLTEifQ.c2lnbmF0dXJl"
	rawCookie = "session=s3cr3t-cookie"
	rawAPIKey = "svck_live_0123456789abcdef"
)

// maskEngine is an Engine with decision_log.include_input and mask as
// given, enough to build decision records.
func maskEngine(t testing.TB, includeInput bool, mask ...string) *Engine {
	t.Helper()
	var cfg config.Config
	cfg.DecisionLog.IncludeInput = &includeInput
	cfg.DecisionLog.Mask = mask
	e := newEngine(cfg, Deps{})
	if err := e.openDecisionMask(); err != nil {
		t.Fatal(err)
	}
	return e
}

func maskRecord() (*audit.Record, *Input) {
	rec := &audit.Record{
		Time: time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC), DecisionID: "d-1", Tenant: "acme", UserID: "user-1",
		Action: "orders:read", Resource: audit.Resource{Type: "orders", ID: "o-1", Tenant: "acme"},
		Allow: true, DenyReasons: []string{}, Reason: "policy-allow", PolicyRevision: "r1", LatencyUS: 42, Source: "envoy",
		IdentityKind: "jwt",
	}
	in := &Input{
		Action:   "orders:read",
		User:     policy.User{ID: "user-1", TenantID: "acme", Roles: []string{"viewer"}, Email: "u@example.com", Claims: map[string]any{"department": "sales"}},
		Resource: policy.Resource{Type: "orders", ID: "o-1", Tenant: "acme"},
		Request: &policy.Request{Method: "GET", Path: "/orders/o-1",
			Query: map[string]string{"access_token": rawBearer},
			Headers: map[string]string{
				"authorization": "Bearer " + rawBearer, "cookie": rawCookie, "x-api-key": rawAPIKey,
				"x-ssn": "123-45-6789", "user-agent": "curl/8",
			}},
	}
	return rec, in
}

// Whatever the mask says, and with or without the input, a record never
// carries a bearer token, a cookie or an API key from the request: they
// are redacted before the mask runs.
func TestDecisionRecordNeverCarriesCredentials(t *testing.T) {
	masks := [][]string{
		nil,
		{"/input/request/headers/x-ssn"},
		{"/input/request/headers/authorization/0", "/input/request/headers", "/erased/0"},
		{"/input"},
		{"/input/request/query/access_token", "/user_id", "/input/user/email", "/nothing/here"},
	}
	for _, include := range []bool{true, false} {
		for _, mask := range masks {
			rec, in := maskRecord()
			b, err := maskEngine(t, include, mask...).decisionRecord(rec, in)
			if err != nil {
				t.Fatalf("include_input %v, mask %q: %v", include, mask, err)
			}
			for _, secret := range []string{rawBearer, rawCookie, "s3cr3t", rawAPIKey, "123-45-6789", "sales", "u@example.com"} {
				if strings.Contains(string(b), secret) {
					t.Errorf("include_input %v, mask %q: record carries %q: %s", include, mask, secret, b)
				}
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("include_input %v, mask %q: record is not JSON: %v", include, mask, err)
			}
			if _, ok := m["input"]; ok != (include && !slices.Contains(mask, "/input")) {
				t.Errorf("include_input %v, mask %q: input present %v: %s", include, mask, ok, b)
			}
		}
	}
}

func TestDecisionRecordMask(t *testing.T) {
	rec, in := maskRecord()
	plain, err := maskEngine(t, true).decisionRecord(rec, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(plain), string(rec.AppendJSON(nil)[:20])) || strings.Contains(string(plain), `"erased"`) {
		t.Errorf("record without a mask: %s", plain)
	}
	b, err := maskEngine(t, true, "/input/request/headers/x-ssn", "/user_id", "/input/roles/0", "/resource/id").decisionRecord(rec, in)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		UserID   *string `json:"user_id"`
		Resource map[string]any
		Erased   []string
		Input    struct {
			Request struct{ Headers map[string]string }
			Action  string
		}
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.UserID != nil || m.Resource["id"] != nil || m.Resource["type"] != "orders" {
		t.Errorf("user_id or resource.id kept: %s", b)
	}
	if _, ok := m.Input.Request.Headers["x-ssn"]; ok || m.Input.Request.Headers["user-agent"] != "curl/8" || m.Input.Action != "orders:read" {
		t.Errorf("input headers %v, action %q", m.Input.Request.Headers, m.Input.Action)
	}
	// What names nothing (input has no roles array) is not listed.
	if want := []string{"/input/request/headers/x-ssn", "/user_id", "/resource/id"}; !slices.Equal(m.Erased, want) {
		t.Errorf("erased = %q, want %q", m.Erased, want)
	}

	b, err = maskEngine(t, false, "/input/action", "/tenant").decisionRecord(rec, in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"input"`) || !strings.Contains(string(b), `"erased":["/tenant"]`) {
		t.Errorf("include_input false, mask of /input/action and /tenant: %s", b)
	}
}

// BenchmarkDecisionRecordMask measures building one decision record, as
// every decision does with a decision log: without a mask (the audit
// record and the redacted input, no parsing) and with one of three
// pointers (parsed into a map, erased, encoded again).
func BenchmarkDecisionRecordMask(b *testing.B) {
	for _, bc := range []struct {
		name string
		mask []string
	}{
		{"none", nil},
		{"three", []string{"/input/request/headers/x-ssn", "/user_id", "/input/resource/id"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := maskEngine(b, true, bc.mask...)
			rec, in := maskRecord()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.decisionRecord(rec, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
