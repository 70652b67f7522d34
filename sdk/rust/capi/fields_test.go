//go:build cgo

package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// fieldsAnswer is a decoded answer of svc_validate_token_fields, with the
// keys of the JSON answer.
type fieldsAnswer struct {
	Allowed    bool            `json:"allowed"`
	Reason     string          `json:"reason"`
	Subject    string          `json:"subject,omitempty"`
	TenantID   string          `json:"tenant_id,omitempty"`
	Message    string          `json:"message,omitempty"`
	Claims     json.RawMessage `json:"claims"`
	DecisionID string          `json:"decision_id,omitempty"`
	claimsID   uint64
}

func (a fieldsAnswer) head() [5]string {
	return [5]string{fmt.Sprint(a.Allowed), a.Reason, a.Subject, a.TenantID, a.Message}
}

// decodeFields reads the layout as the Rust crate does.
func decodeFields(b []byte) (fieldsAnswer, error) {
	if len(b) < fieldsHeader || b[0] != fieldsFormat {
		return fieldsAnswer{}, fmt.Errorf("not a fields answer: %.100q", b)
	}
	var parts [6]string
	at := fieldsHeader
	for i := range parts {
		n := int(binary.NativeEndian.Uint32(b[16+4*i:]))
		if at+n > len(b) {
			return fieldsAnswer{}, fmt.Errorf("part %d of %d bytes overruns the answer", i, n)
		}
		parts[i] = string(b[at : at+n])
		at += n
	}
	if at != len(b) {
		return fieldsAnswer{}, fmt.Errorf("%d bytes after the parts", len(b)-at)
	}
	return fieldsAnswer{
		Allowed: b[1] == 1, Reason: parts[0], Subject: parts[1], TenantID: parts[2], Message: parts[3],
		Claims: json.RawMessage(parts[4]), DecisionID: parts[5], claimsID: binary.NativeEndian.Uint64(b[8:]),
	}, nil
}

// TestValidateTokenFields: the fields carry what the JSON answer carries,
// in the caller's buffer or in malloc'd memory, and one claim set keeps
// one id.
func TestValidateTokenFields(t *testing.T) {
	h, p := openTestEngine(t)
	big := idptest.Claims("user-2", "acme", "viewer")
	big["note"] = strings.Repeat("<long & quoted \"claim\">", 20) // past abiBufSize
	tests := []struct {
		name, token string
		wantReason  string
		wantClaims  bool
	}{
		{"valid", p.Token(t, idptest.Claims("user-1", "acme", "viewer")), "ok", true},
		{"valid, past the caller's buffer", p.Token(t, big), "ok", true},
		{"malformed", "not-a-jwt", "token-malformed", false},
		{"other tenant", p.Token(t, idptest.Claims("user-3", "globex", "viewer")), "tenant-mismatch", false},
		{"missing", "", "token-missing", false},
	}
	ids := map[uint64]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := abiValidateFields(h, tc.token)
			got, err := decodeFields(raw)
			if err != nil {
				t.Fatal(err)
			}
			var want fieldsAnswer
			if err := json.Unmarshal([]byte(abiValidate(h, tc.token)), &want); err != nil {
				t.Fatal(err)
			}
			var gotClaims, wantClaims any
			if err := json.Unmarshal(got.Claims, &gotClaims); err != nil {
				t.Fatalf("claims %s: %v", got.Claims, err)
			}
			json.Unmarshal(want.Claims, &wantClaims)
			if !reflect.DeepEqual(gotClaims, wantClaims) {
				t.Errorf("claims = %s; the JSON answer's are %s", got.Claims, want.Claims)
			}
			if got.head() != want.head() || got.Reason != tc.wantReason {
				t.Errorf("fields = %+v; the JSON answer is %+v (reason %s)", got, want, tc.wantReason)
			}
			// Each answer is a decision of its own, with its own id.
			if got.DecisionID == "" || want.DecisionID == "" || got.DecisionID == want.DecisionID {
				t.Errorf("decision ids %q (fields) and %q (JSON): want two, distinct", got.DecisionID, want.DecisionID)
			}
			if (got.claimsID != 0) != tc.wantClaims || (gotClaims != nil) != tc.wantClaims {
				t.Errorf("claims id %d, claims %v; want claims: %v", got.claimsID, gotClaims, tc.wantClaims)
			}
			if got.claimsID == 0 {
				return
			}
			if other, ok := ids[got.claimsID]; ok {
				t.Errorf("claims id %d given to %q too", got.claimsID, other)
			}
			ids[got.claimsID] = tc.name
			again, _ := decodeFields(abiValidateFields(h, tc.token))
			if again.claimsID != got.claimsID {
				t.Errorf("the same cached token's claims id went from %d to %d", got.claimsID, again.claimsID)
			}
		})
	}

	abiClose(h)
	if got := string(abiValidateFields(h, "x")); !strings.HasPrefix(got, `{"error":{"reason":"engine-closed"`) {
		t.Errorf("fields after close = %s", got)
	}
}
