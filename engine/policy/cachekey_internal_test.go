package policy

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestTypedPartMatchesValue checks that the key part built from the typed
// input is, for every kind of path, the one read from the whole document
// Value builds.
func TestTypedPartMatchesValue(t *testing.T) {
	full := fullInput()
	emptyRequest := full
	emptyRequest.Request = &Request{}
	badUTF8 := full
	badUTF8.Action = "orders:\xffread"
	badUTF8.User.Roles = []string{"\xc3"}
	badUTF8.Request = &Request{Method: "G\xfeT", Headers: map[string]string{"x-\xff": "\xfe"}}
	inputs := map[string]Input{
		"every field":   full,
		"zero":          {},
		"empty request": emptyRequest,
		"invalid UTF-8": badUTF8,
		"null claims":   {User: User{Roles: []string{}}},
		"own identity":  ownIdentityClaims(full),
		"bare identity": {Identity: &Identity{}},
	}
	paths := probePaths()
	for name, in := range inputs {
		doc, err := in.Value()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			t.Run(name+"/"+p, func(t *testing.T) {
				path := termPaths([]string{p})[0]
				want := partAt(doc, path)
				got, err := typedPart(&in, path, &termBuf{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !sameParts([]keyPart{got}, []keyPart{want}) {
					t.Fatalf("typed part = {%d %v}, document part = {%d %v}", got.depth, got.v, want.depth, want.v)
				}
			})
		}
	}
}

// TestSameValue checks the equality a cache hit is confirmed with.
func TestSameValue(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"equal objects in another order", `{"a": 1, "b": [true, null]}`, `{"b": [true, null], "a": 1}`, true},
		{"numbers written alike", `1.5`, `1.5`, true},
		{"numbers written otherwise", `1`, `1.0`, false},
		{"numeric keys written otherwise", `{1: "a"}`, `{1.0: "a"}`, false},
		{"null and empty string", `null`, `""`, false},
		{"false and null", `false`, `null`, false},
		{"array and set", `["a"]`, `{"a"}`, false},
		{"equal sets", `{"b", "a"}`, `{"a", "b"}`, true},
		{"sets with numbers written otherwise", `{1, 2}`, `{1.0, 2}`, false},
		{"longer array", `["a"]`, `["a", "b"]`, false},
		{"object with another value", `{"a": "x"}`, `{"a": "y"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := ast.MustParseTerm(tt.a).Value, ast.MustParseTerm(tt.b).Value
			if got := sameValue(a, b); got != tt.want {
				t.Fatalf("sameValue(%s, %s) = %v", tt.a, tt.b, got)
			}
			var ea, eb keyEnc
			ea.value(a)
			eb.value(b)
			if got := bytes.Equal(ea.bytes(), eb.bytes()); got != tt.want {
				t.Fatalf("encodings of %s and %s equal: %v", tt.a, tt.b, got)
			}
		})
	}
}

// fullInput is an input with every field set, claims of every JSON kind
// and a request with query and headers.
func fullInput() Input {
	in := Input{
		Action: "orders:update",
		User: User{
			ID: "u-1", Role: "editor", Roles: []string{"editor", "billing"}, TenantID: "acme", Email: "e@acme.example",
			Claims: map[string]any{
				"level":  json.Number("1.0"),
				"groups": []any{"a", "b"},
				"nested": map[string]any{"ok": true, "none": nil},
			},
		},
		Resource: Resource{Type: "orders", ID: "ord-1", Tenant: "acme"},
		Tenant:   Tenant{ID: "acme", Plan: "team"},
		Request: &Request{
			Method: "POST", Path: "/api/orders", Host: "shop.example",
			Query:   map[string]string{"dry_run": "1"},
			Headers: map[string]string{"x-request-id": "r-1", "accept": "application/json"},
		},
	}
	// As the engine fills it in: the user's roles and claims, shared.
	in.Identity = &Identity{Kind: "jwt", ID: in.User.ID, TenantID: in.User.TenantID, Roles: in.User.Roles,
		Issuer: "https://idp.example", Claims: in.User.Claims}
	return in
}

// ownIdentityClaims is full with an identity whose claims are a map of
// their own, as a caller evaluating an input as given may send.
func ownIdentityClaims(full Input) Input {
	id := *full.Identity
	id.Claims = map[string]any{"level": "other", "nested": map[string]any{"ok": false}}
	id.Method, id.Issuer = "saml", ""
	full.Identity = &id
	return full
}

// probePaths are the input paths the key and input tests read: every
// field of the input, a level below each leaf, and names the input does
// not have.
func probePaths() []string {
	return []string{
		"action", "action.x",
		"user", "user.id", "user.role", "user.roles", "user.roles.x", "user.tenant_id", "user.email", "user.email.x",
		"user.claims", "user.claims.level", "user.claims.level.x", "user.claims.groups", "user.claims.nested.ok",
		"user.claims.nested.none", "user.claims.nested.none.x", "user.claims.missing", "user.other",
		"resource", "resource.type", "resource.id", "resource.tenant", "resource.tenant.x", "resource.other",
		"tenant", "tenant.id", "tenant.plan", "tenant.plan.x", "tenant.other",
		"request", "request.method", "request.path", "request.host", "request.query", "request.query.dry_run",
		"request.headers", "request.headers.x-request-id", "request.headers.x-\ufffd", "request.headers.missing",
		"request.method.x", "request.other",
		"identity", "identity.kind", "identity.kind.x", "identity.id", "identity.tenant_id", "identity.roles",
		"identity.issuer", "identity.method", "identity.claims", "identity.claims.level", "identity.claims.nested.ok",
		"identity.other",
		"other", "other.x",
	}
}

// termPaths turns dotted input paths into term paths ("" is the whole
// input).
func termPaths(dotted []string) [][]*ast.Term {
	var out [][]*ast.Term
	for _, p := range dotted {
		path := []*ast.Term{}
		if p != "" {
			for _, k := range strings.Split(p, ".") {
				path = append(path, ast.StringTerm(k))
			}
		}
		out = append(out, path)
	}
	return out
}
