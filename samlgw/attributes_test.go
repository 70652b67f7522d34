package samlgw_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// An attribute named like a registered claim in another case (or with a
// Unicode case variant, such as "ſ" for "s") is dropped: an application
// that decodes the token with encoding/json into a struct matches keys
// case-insensitively and would take it for the claim itself.
func TestACSAttributeCannotShadowClaimInAnotherCase(t *testing.T) {
	f := newFixture(t, withSAML(allowIDPInitiated))
	r := valid()
	shadows := []string{"Tenant_ID", "TENANT_ID", "SUB", "\u017fub", "Roles", "EMAIL", "Exp", "Iss", "aUD", "Role", "JTI", "nbF", "IAT",
		"idp", "IDP_SID", "session_id", "Auth_Time"}
	for _, name := range shadows {
		r.Attributes = append(r.Attributes, testidp.Attribute{Name: name, Values: []string{"mallory"}})
	}
	a := f.post(t, signed(t, r), true)
	if a.status != http.StatusOK {
		t.Fatalf("%d %q %s", a.status, a.code, a.message)
	}
	c := claimsOf(t, a.token)
	for _, name := range shadows {
		if _, ok := c[name]; ok {
			t.Errorf("attribute %q became a claim", name)
		}
	}
	if c["department"] != "finance" {
		t.Errorf("the ordinary attribute department = %v, want finance", c["department"])
	}
	// What an application decoding into a struct reads.
	var app struct {
		Sub    string   `json:"sub"`
		Tenant string   `json:"tenant_id"`
		Email  string   `json:"email"`
		Roles  []string `json:"roles"`
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(a.token, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(payload, &app); err != nil {
		t.Fatal(err)
	}
	if app.Sub != "alice@example.com" || app.Tenant != "AcMe" || app.Email != "alice@example.com" || strings.Join(app.Roles, ",") != "admin,billing" {
		t.Errorf("decoded into a struct: %+v, want alice@example.com / AcMe / alice@example.com / admin,billing", app)
	}
}

// attribute_mapping renames the attributes that fill email, roles and
// tenant_id; the default names then become ordinary custom claims, and an
// attribute named like a registered claim never sets it.
func TestACSAttributeMapping(t *testing.T) {
	f := newFixture(t, withSAML(func(s *config.SAML) {
		s.AllowIDPInitiated = true
		s.AttributeMapping = config.AttributeMapping{Email: "mail", Role: "memberOf", Tenant: "org"}
	}))
	r := valid()
	r.NameID = "alice"
	r.Attributes = []testidp.Attribute{
		{Name: "mail", Values: []string{"alice@example.org"}},
		{Name: "memberOf", Values: []string{"admins", "auditors"}},
		{Name: "org", Values: []string{"globex"}},
		{Name: "tenant_id", Values: []string{"acme"}},
		{Name: "sub", Values: []string{"mallory"}},
		{Name: "cost_center", Values: []string{"42"}},
	}
	a := f.post(t, signed(t, r), true)
	if a.status != http.StatusOK {
		t.Fatalf("%d %q %s", a.status, a.code, a.message)
	}
	c := claimsOf(t, a.token)
	for k, want := range map[string]any{"sub": "alice", "email": "alice@example.org", "tenant_id": "globex", "cost_center": "42"} {
		if c[k] != want {
			t.Errorf("claim %s = %v, want %v", k, c[k], want)
		}
	}
	if roles, _ := c["roles"].([]any); len(roles) != 2 || roles[0] != "admins" || roles[1] != "auditors" {
		t.Errorf("roles = %v, want [admins auditors]", c["roles"])
	}
	// The default tenant attribute is no longer the tenant, and cannot
	// become one through a custom claim either (tenant_id is registered).
	r.Attributes = r.Attributes[:2]
	r.Attributes = append(r.Attributes, testidp.Attribute{Name: "tenant_id", Values: []string{"acme"}})
	if a := f.post(t, signed(t, r), true); a.status != http.StatusForbidden || a.code != string(reason.SAMLTenantMissing) {
		t.Errorf("without the mapped tenant attribute: %d %q, want 403 %q", a.status, a.code, reason.SAMLTenantMissing)
	}
}
