package wire_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/svc-dev/svc/wire"
)

// denyByReflection is DenyBody as encoding/json writes its fields, the
// way MarshalJSON wrote it before AppendJSON.
func denyByReflection(t *testing.T, b wire.DenyBody) []byte {
	t.Helper()
	type withID struct {
		Allow       bool     `json:"allow"`
		DenyReasons []string `json:"deny_reasons"`
		Reason      string   `json:"reason"`
		DecisionID  string   `json:"decision_id"`
	}
	type withoutID struct {
		Allow       bool     `json:"allow"`
		DenyReasons []string `json:"deny_reasons"`
		Reason      string   `json:"reason"`
	}
	if b.DenyReasons == nil {
		b.DenyReasons = []string{}
	}
	var out []byte
	var err error
	if b.OmitEmptyDecisionID && b.DecisionID == "" {
		out, err = json.Marshal(withoutID{b.Allow, b.DenyReasons, b.Reason})
	} else {
		out, err = json.Marshal(withID{b.Allow, b.DenyReasons, b.Reason, b.DecisionID})
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzDenyBodyJSON compares AppendJSON and MarshalJSON, and json.Marshal
// of a DenyBody through them, with encoding/json's own rendering.
func FuzzDenyBodyJSON(f *testing.F) {
	for _, s := range []string{"", "policy-deny", `q"b\s`, "<a>&b", "\x00\x1f\x7f\b\f\n\r\t", "é ✓ 𝄞", "\u2028\u2029",
		"\ufffd", "bad \xff", "\xe2\x80", "\xed\xa0\x80"} {
		f.Add(false, s, s, s, true)
		f.Add(true, "policy-deny", s, "", false)
	}
	f.Fuzz(func(t *testing.T, allow bool, reason, why, id string, omit bool) {
		for _, reasons := range [][]string{nil, {}, {why}, {why, reason, id}} {
			b := wire.DenyBody{Allow: allow, DenyReasons: reasons, Reason: reason, DecisionID: id, OmitEmptyDecisionID: omit}
			want := denyByReflection(t, b)
			if got := b.AppendJSON([]byte("prefix")); !bytes.Equal(got, append([]byte("prefix"), want...)) {
				t.Fatalf("AppendJSON %+v:\n%s\nwant\n%s", b, got, want)
			}
			got, err := json.Marshal(b)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("json.Marshal %+v: %v\n%s\nwant\n%s", b, err, got, want)
			}
		}
	})
}
