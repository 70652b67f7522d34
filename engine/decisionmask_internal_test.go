package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"go.opentelemetry.io/otel/trace"
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

// A path sent with its query, as a caller of Authorize may, reaches the
// record without the query's values, nor the names that are data: the
// policy saw it whole, the record is read by people.
func TestDecisionRecordPathWithoutQueryValues(t *testing.T) {
	rec, in := maskRecord()
	in.Request.Path = "/orders/o-1?access_token=" + rawBearer + "&queryname" + rawAPIKey + "&page=2"
	b, err := maskEngine(t, true).decisionRecord(rec, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{rawBearer, rawAPIKey} {
		if strings.Contains(string(b), secret) {
			t.Errorf("record carries %q: %s", secret, b)
		}
	}
	var m struct {
		Input Input `json:"input"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if got, want := m.Input.Request.Path, "/orders/o-1?access_token=[REDACTED]&[REDACTED]&page=[REDACTED]"; got != want {
		t.Errorf("record's path = %q, want %q", got, want)
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

// rawSource is a RequestSource over raw headers, keeping those keep keeps,
// and the query as given.
type rawSource struct {
	headers map[string]string
	keep    func(string) bool
	query   map[string]string
}

func (s rawSource) SourceHeaders() map[string]string { return s.headers }
func (s rawSource) KeepHeader(k string) bool         { return s.keep(k) }
func (s rawSource) SourceQuery() map[string]string   { return s.query }

// A record whose request headers and query are read from a RequestSource
// is byte for byte the record of the request with them built as maps:
// sorted, filtered and redacted alike, members left out when empty.
func TestDecisionRecordFromRequestSource(t *testing.T) {
	raw := map[string]string{
		":authority": "shop.example", ":path": "/orders/o-1?expand=items", "x-envoy-internal": "true",
		"authorization": "Bearer " + rawBearer, "cookie": rawCookie, "user-agent": "curl/8", "accept": "*/*",
		"x-request-id": "r-1", "x-ssn": "123-45-6789", "traceparent": "00-01-02-01",
	}
	// Past what is sorted on the stack.
	many := maps.Clone(raw)
	for i := range 40 {
		many[fmt.Sprintf("x-h-%02d", 40-i)] = "v"
	}
	for _, tc := range []struct {
		name  string
		raw   map[string]string
		keep  func(string) bool
		query map[string]string
	}{
		{"some kept", raw, func(k string) bool { return !strings.HasPrefix(k, ":") && !strings.HasPrefix(k, "x-envoy-") }, map[string]string{"expand": "items", "access_token": rawBearer}},
		{"all kept, no query", raw, func(string) bool { return true }, nil},
		{"none kept", raw, func(string) bool { return false }, map[string]string{"a": "1"}},
		{"many, some kept", many, func(k string) bool { return !strings.HasPrefix(k, ":") }, nil},
		{"many, none kept", many, func(string) bool { return false }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, in := maskRecord()
			src := rawSource{headers: tc.raw, keep: tc.keep, query: tc.query}
			built := *in.Request
			built.Headers, built.Query = nil, tc.query
			for k, v := range tc.raw {
				if tc.keep(k) {
					if built.Headers == nil {
						built.Headers = map[string]string{}
					}
					built.Headers[k] = v
				}
			}
			e := maskEngine(t, true)
			in.Request = &built
			want := e.appendDecisionRecord(nil, rec, in, nil, trace.SpanContext{})
			bare := built
			bare.Headers, bare.Query = nil, nil
			in.Request = &bare
			got := e.appendDecisionRecord(nil, rec, in, src, trace.SpanContext{})
			if string(got) != string(want) {
				t.Fatalf("from the source:\n%s\nfrom the maps:\n%s", got, want)
			}
			if strings.Contains(string(got), rawBearer) || strings.Contains(string(got), rawCookie) {
				t.Fatalf("a credential in the record: %s", got)
			}
		})
	}
}

// A decision record given the span context writes the trace and span ids
// from their bytes exactly as from the strings traceIDs makes.
func TestDecisionRecordTraceIDs(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	})
	e := maskEngine(t, true)
	rec, in := maskRecord()
	got := e.appendDecisionRecord(nil, rec, in, nil, sc)
	rec.TraceID, rec.SpanID = traceIDs(trace.ContextWithSpanContext(context.Background(), sc))
	want := e.appendDecisionRecord(nil, rec, in, nil, trace.SpanContext{})
	if string(got) != string(want) {
		t.Fatalf("from the bytes:\n%s\nfrom the strings:\n%s", got, want)
	}
	if !strings.Contains(string(got), `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"`) {
		t.Fatalf("ids missing: %s", got)
	}
}
