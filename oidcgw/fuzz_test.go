package oidcgw_test

import (
	"testing"

	"github.com/svc-dev/svc/oidcgw"
)

// A logout token's payload comes from whoever posts it (verified, but
// its shape is the provider's): the checks never panic, and an accepted
// one names a sid or a sub, carries the event and no nonce.
func FuzzParseLogoutClaims(f *testing.F) {
	for _, s := range []string{
		`{"iss":"https://op","sub":"a","events":{"http://schemas.openid.net/event/backchannel-logout":{}}}`,
		`{"sid":"s","events":{"http://schemas.openid.net/event/backchannel-logout":{}},"nonce":"n"}`,
		`{"sid":1}`, `[]`, `null`, `{"events":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := oidcgw.ParseLogoutClaims(b)
		if err != nil {
			return
		}
		if c.SID == "" && c.Sub == "" || c.Nonce != nil {
			t.Fatalf("accepted %s", b)
		}
		if _, ok := c.Events[oidcgw.BackchannelLogoutEvent]; !ok {
			t.Fatalf("accepted without the event: %s", b)
		}
	})
}
