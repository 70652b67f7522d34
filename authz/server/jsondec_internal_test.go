package server

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/internal/testkit"
)

// FuzzDecodeAuthorizeRequest: whatever decodeAuthorizeRequest accepts,
// protojson accepts too, as the same message.
func FuzzDecodeAuthorizeRequest(f *testing.F) {
	for _, seed := range testkit.ReadGlob(f, filepath.Join("testdata", "http-requests", "*.json")) {
		f.Add(seed.Data)
	}
	for _, s := range []string{
		`{"token":"t","action":"orders:read","resource":{"id":"o-1"}}`,
		" {\n\t\"action\" : \"a\" ,\r\"resource\":{ \"type\":\"orders\",\"id\":\"1\",\"tenant\":\"acme\" } } \n",
		`{}`, `{"resource":{}}`, `{"token":"é ✓ 𝄞"}`, `{"token":"a\"b"}`, `{"token":"a\u0041"}`, `{"token":null}`,
		`{"token":"a","token":"b"}`, `{"resource":{"id":"1","id":"2"}}`, `{"resource":{},"resource":{}}`, `{"Token":"x"}`,
		`{"token":"x",}`, `{"token":"x"} {}`, `{"token":"x"`, `{"token":1}`, `{"resource":"x"}`, `{"request":{}}`,
		"{\"token\":\"\xff\"}", "{\"token\":\"\x01\"}", `[]`, ` `, `{"resource":{"type":"t"},"action":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := &authzv1.AuthorizeRequest{}
		if !decodeAuthorizeRequest(body, got) {
			return
		}
		want := &authzv1.AuthorizeRequest{}
		if err := jsonIn.Unmarshal(body, want); err != nil {
			t.Fatalf("decodeAuthorizeRequest accepts %q, protojson refuses it: %v", body, err)
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Fatalf("%q (-protojson +decodeAuthorizeRequest):\n%s", body, diff)
		}
	})
}

// FuzzDecodeValidateTokenRequest: whatever decodeValidateTokenRequest
// accepts, protojson accepts too, as the same message.
func FuzzDecodeValidateTokenRequest(f *testing.F) {
	for _, s := range []string{`{"token":"a.b.c"}`, " { \"token\" : \"t\" } ", `{}`, `{"token":"a","token":"b"}`, `{"token":"\u0041"}`,
		`{"token":null}`, `{"token":"x","action":"y"}`, `{"Token":"x"}`, `{"token":"x"}x`, "{\"token\":\"\xff\"}", `{"token":"é"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := &authzv1.ValidateTokenRequest{}
		if !decodeValidateTokenRequest(body, got) {
			return
		}
		want := &authzv1.ValidateTokenRequest{}
		if err := jsonIn.Unmarshal(body, want); err != nil {
			t.Fatalf("decodeValidateTokenRequest accepts %q, protojson refuses it: %v", body, err)
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Fatalf("%q (-protojson +decodeValidateTokenRequest):\n%s", body, diff)
		}
	})
}

// TestDecodeAuthorizeRequestTakesSDKBodies: the bodies SDKs send are
// decoded here, not left to protojson.
func TestDecodeAuthorizeRequestTakesSDKBodies(t *testing.T) {
	for _, body := range []string{
		`{"token":"a.b.c","action":"orders:read","resource":{"id":"o-1"}}`,
		`{"action":"orders:read","resource":{"type":"orders","id":"o-1","tenant":"acme"}}`,
		`{"action":"orders:read"}`,
	} {
		if !decodeAuthorizeRequest([]byte(body), &authzv1.AuthorizeRequest{}) {
			t.Errorf("decodeAuthorizeRequest declines %s", body)
		}
	}
	if !decodeValidateTokenRequest([]byte(`{"token":"a.b.c"}`), &authzv1.ValidateTokenRequest{}) {
		t.Error("decodeValidateTokenRequest declines a token")
	}
}
