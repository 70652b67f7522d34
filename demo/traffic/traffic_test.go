package traffic

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestNewRefuses(t *testing.T) {
	idp := IDPConfig{Resource: "urn:svc:demo", Clients: []Client{{ID: "demo-viewer"}, {ID: "demo-billing"}, {ID: "other-admin"}}}
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"target not a URL", Config{Target: "envoy:8080", TokenURL: "http://idp/token", IDP: idp}, `"envoy:8080" is not an http(s) URL`},
		{"token URL scheme", Config{Target: "http://envoy:8080", TokenURL: "ftp://idp/token", IDP: idp}, "is not an http(s) URL"},
		{"no resource", Config{Target: "http://envoy:8080", TokenURL: "http://idp/token", IDP: IDPConfig{Clients: idp.Clients}}, "no resource"},
		{"missing client", Config{Target: "http://envoy:8080", TokenURL: "http://idp/token", IDP: IDPConfig{Resource: "r", Clients: idp.Clients[:1]}}, `needs client "demo-billing"`},
		{"ok", Config{Target: "http://envoy:8080", TokenURL: "http://idp/token", IDP: idp}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg, nil)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestTamperChangesOnlyTheSignature(t *testing.T) {
	for _, tok := range []string{"aGVhZA.Ym9keQ.c2lnbmF0dXJl", "aGVhZA.Ym9keQ.AAAA"} {
		got := tamper(tok)
		i := strings.LastIndexByte(tok, '.')
		if got[:i+1] != tok[:i+1] {
			t.Errorf("tamper(%s) = %s changed header or payload", tok, got)
		}
		a, _ := base64.RawURLEncoding.DecodeString(tok[i+1:])
		b, err := base64.RawURLEncoding.DecodeString(got[i+1:])
		if err != nil || string(a) == string(b) || len(a) != len(b) {
			t.Errorf("tamper(%s) = %s: signature bytes %x → %x (%v)", tok, got, a, b, err)
		}
	}
}
