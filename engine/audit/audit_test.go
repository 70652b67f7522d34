package audit

import (
	"bytes"
	"encoding/json"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// requiredKeys are the keys every line carries; span_id and source are
// omitted when empty.
var requiredKeys = []string{
	"time", "decision_id", "trace_id", "tenant", "user_id", "action", "resource",
	"allow", "deny_reasons", "reason", "policy_revision", "latency_us", "simulated",
}

func fixedTime() time.Time {
	return time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600))
}

func fullRecord() Record {
	return Record{
		Time:           fixedTime(),
		DecisionID:     "0d9f1c7e-3b7a-4c52-9a43-0e6b5a1f2c11",
		TraceID:        "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID:         "00f067aa0ba902b7",
		Tenant:         "acme",
		UserID:         "user-42",
		Action:         "orders:read",
		Resource:       Resource{Type: "orders", ID: "o-17", Tenant: "acme"},
		Allow:          false,
		DenyReasons:    []string{"missing-role", "tenant-mismatch"},
		Reason:         "policy-deny",
		PolicyRevision: "rev-7",
		LatencyUS:      183,
		Simulated:      true,
		Source:         SourceEnvoy,
		IdentityKind:   "api_key",
	}
}

// encodingCases are shared by the round-trip test and the golden file.
func encodingCases() []struct {
	name string
	rec  Record
} {
	escapes := fullRecord()
	escapes.UserID = "quote\" backslash\\ nl\n tab\t bell\a del\x7f"
	escapes.Action = "ünïcödé:✓ \u2028\u2029"
	escapes.Resource.ID = "bad\xffutf8\xc3"
	escapes.DenyReasons = []string{"<html>&amp;", ""}
	minimal := Record{Time: time.Unix(0, 0)}
	return []struct {
		name string
		rec  Record
	}{
		{"full", fullRecord()},
		{"minimal", minimal},
		{"allow_no_span_no_source", Record{Time: fixedTime(), DecisionID: "d", TraceID: "t", Tenant: "acme",
			UserID: "u", Action: "orders:create", Resource: Resource{Type: "orders", Tenant: "acme"},
			Allow: true, DenyReasons: []string{}, Reason: "policy-allow", PolicyRevision: "r1", LatencyUS: 9}},
		{"escapes", escapes},
		{"resource_attributes", Record{Time: fixedTime(), DecisionID: "d", Tenant: "acme", UserID: "u-1",
			Action: "orders:update", Resource: Resource{Type: "orders", ID: "o-1", Tenant: "acme",
				Attributes: map[string]any{"status": "open", "owner": "u-1", "note": "<b>&\u2028",
					"tags": []any{"a", true, nil}, "meta": map[string]any{"z": "1", "a": false}}},
			Allow: true, DenyReasons: []string{}, Reason: "policy-allow", PolicyRevision: "r1", LatencyUS: 9}},
	}
}

func TestAppendJSONRoundTrip(t *testing.T) {
	for _, tc := range encodingCases() {
		t.Run(tc.name, func(t *testing.T) {
			line := tc.rec.AppendJSON(nil)
			if !json.Valid(line) {
				t.Fatalf("invalid JSON: %s", line)
			}
			var keys map[string]json.RawMessage
			if err := json.Unmarshal(line, &keys); err != nil {
				t.Fatal(err)
			}
			for _, k := range requiredKeys {
				if _, ok := keys[k]; !ok {
					t.Errorf("key %q missing in %s", k, line)
				}
			}
			if got := string(keys["deny_reasons"]); got == "null" {
				t.Errorf("deny_reasons is null")
			}
			if _, ok := keys["span_id"]; ok != (tc.rec.SpanID != "") {
				t.Errorf("span_id present = %v, want %v", ok, tc.rec.SpanID != "")
			}
			if _, ok := keys["source"]; ok != (tc.rec.Source != "") {
				t.Errorf("source present = %v, want %v", ok, tc.rec.Source != "")
			}
			var ts string
			if err := json.Unmarshal(keys["time"], &ts); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(ts, "Z") {
				t.Errorf("time %q is not UTC", ts)
			}

			var got Record
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatal(err)
			}
			want := tc.rec
			want.DenyReasons = append([]string{}, want.DenyReasons...)
			want.UserID = strings.ToValidUTF8(want.UserID, "\uFFFD")
			want.Action = strings.ToValidUTF8(want.Action, "\uFFFD")
			want.Resource.ID = strings.ReplaceAll(want.Resource.ID, "\xff", "\uFFFD")
			want.Resource.ID = strings.ReplaceAll(want.Resource.ID, "\xc3", "\uFFFD")
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMarshalJSONMatchesAppendJSON(t *testing.T) {
	r := fullRecord()
	got, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	// json.Marshal compacts and HTML-escapes the output of MarshalJSON;
	// the full record holds no HTML characters, so both must agree.
	if want := r.AppendJSON(nil); !bytes.Equal(got, want) {
		t.Errorf("json.Marshal = %s\nAppendJSON   = %s", got, want)
	}
}

func TestAppendJSONGolden(t *testing.T) {
	var buf []byte
	for _, tc := range encodingCases() {
		buf = tc.rec.AppendJSON(buf)
		buf = append(buf, '\n')
	}
	testkit.Golden(t, *update, filepath.Join("testdata", "records.golden.jsonl"), buf)
}

// encodingJSON is the reference: encoding/json with HTML escaping off.
func encodingJSON(t testing.TB, s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"ascii", "orders:read"},
		{"quote_backslash", `a"b\c`},
		{"controls", "\x00\x01\b\f\n\r\t\x1f\x7f"},
		{"html", "<a href='x'>&</a>"},
		{"multibyte", "日本語 ü ✓ 🙂"},
		{"line_separators", "a\u2028b\u2029c"},
		{"invalid_utf8", "a\xffb\xc3\x28c\xed\xa0\x80"},
		{"truncated_rune_at_end", "abc\xe2\x82"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(appendString(nil, tc.in))
			if want := encodingJSON(t, tc.in); got != want {
				t.Errorf("appendString(%q) = %s, want %s", tc.in, got, want)
			}
		})
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `"\`, "\x00\x1f", "\u2028", "\xff\xfe", "ü✓🙂", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := string(appendString(nil, s))
		if want := encodingJSON(t, s); got != want {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}
