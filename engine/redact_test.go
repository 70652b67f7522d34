package engine_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/policy"
)

func TestRedactedInputKeepsOnlySubjectTenantAndRoles(t *testing.T) {
	in := engine.Input{
		Action: "orders:read",
		User: policy.User{ID: "u-1", Role: "viewer", Roles: []string{"viewer", "billing"}, TenantID: "acme",
			Email: "alice@example.com", Claims: map[string]any{"department": "sales", "ssn": "123-45-6789"}},
		Resource: policy.Resource{Type: "orders", ID: "o-1", Tenant: "acme"},
		Request: &policy.Request{Method: "GET", Path: "/orders/o-1", Query: map[string]string{"token": "abc"},
			Headers: map[string]string{"user-agent": "curl", "x-api-key": "k-secret"}},
	}
	in.Identity = &policy.Identity{Kind: "session", ID: "u-1", TenantID: "acme", Roles: in.User.Roles,
		Issuer: "https://sso.acme.example", Method: "saml", Claims: in.User.Claims}
	got := string(engine.RedactedInput(in))
	for _, secret := range []string{"alice@example.com", "sales", "123-45-6789", "k-secret", "abc"} {
		if strings.Contains(got, secret) {
			t.Errorf("redacted input shows %q: %s", secret, got)
		}
	}
	var back engine.Input
	if err := json.Unmarshal([]byte(got), &back); err != nil {
		t.Fatal(err)
	}
	u := back.User
	if u.ID != "u-1" || u.TenantID != "acme" || len(u.Roles) != 2 || u.Role != "viewer" || u.Email != engine.Redacted ||
		u.Claims["ssn"] != engine.Redacted || back.Request.Headers["user-agent"] != "curl" || back.Action != "orders:read" {
		t.Errorf("redacted input = %+v", back)
	}
	if id := back.Identity; id == nil || id.Kind != "session" || id.Method != "saml" || id.ID != "u-1" || id.Claims["ssn"] != engine.Redacted {
		t.Errorf("redacted identity = %+v", id)
	}
	if in.User.Email != "alice@example.com" || in.Request.Headers["x-api-key"] != "k-secret" || in.User.Claims["ssn"] != "123-45-6789" ||
		in.Identity.Claims["ssn"] != "123-45-6789" {
		t.Error("RedactedInput changed the input it was given")
	}
}
