package policy

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// TestInputMatchesDocument checks that the document Eval evaluates a
// typed input on is, for varied sets of key paths and inputs, the one
// decisionCache.document builds from the input's key parts.
func TestInputMatchesDocument(t *testing.T) {
	full := fullInput()
	badUTF8 := full
	badUTF8.Action = "orders:\xffread"
	badUTF8.User.Roles = []string{"\xc3"}
	badUTF8.Request = &Request{Method: "G\xfeT", Headers: map[string]string{"x-\xff": "\xfe"}}
	scalarClaims := full
	scalarClaims.User.Claims = map[string]any{"level": "x", "nested": 3, "groups": nil}
	inputs := map[string]Input{
		"every field":   full,
		"zero":          {},
		"empty request": {Request: &Request{}},
		"invalid UTF-8": badUTF8,
		"null claims":   {User: User{Roles: []string{}}},
		"scalar claims": scalarClaims,
		"own identity":  ownIdentityClaims(full),
		"bare identity": {Identity: &Identity{}},
	}
	paths := append(probePaths(), "user.claims.nested", "user.claims.nested.ok.x")
	rng := rand.New(rand.NewPCG(1, 2))
	sets := [][]string{{""}, paths, {"action", "user.roles", "user.role", "user.tenant_id", "resource.tenant", "tenant.id", "tenant.plan"}}
	for range 300 {
		n := 1 + rng.IntN(12)
		set := make([]string, n)
		for i := range set {
			set[i] = paths[rng.IntN(len(paths))]
		}
		sets = append(sets, set)
	}
	for _, set := range sets {
		keyPaths := termPaths(set)
		plan := cachePlan{paths: minimalPaths(keyPaths)}
		s := &Set{plan: plan, cache: newDecisionCache(plan, 16)}
		// One builder for every input, as a pooled state has.
		d := &docBuilder{}
		for name, in := range inputs {
			k, whole, err := s.cache.key(&in, nil, new(keyEnc))
			if err != nil {
				t.Fatal(err)
			}
			want := whole
			if want == nil {
				want = s.cache.document(k.parts)
			}
			got, err := s.input(&in, d)
			if err != nil {
				t.Fatal(err)
			}
			if !sameValue(got, want) {
				t.Errorf("paths %q, input %s:\n got %v\nwant %v", set, name, got, want)
			}
			d.reset()
		}
	}
}

// TestEvalKeepsEarlierResults checks that a result holds nothing of the
// evaluation state, whose input document the next evaluation rebuilds in
// place: reasons taken straight from the input stay as they were.
func TestEvalKeepsEarlierResults(t *testing.T) {
	s, err := FromModules(map[string]string{"echo.rego": `package svc.authz
default allow := false
deny_reasons contains input.action
deny_reasons contains input.user.tenant_id
deny_reasons contains input.user.roles[_]
`}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.cache == nil {
		t.Fatal("the policy's decisions are not cacheable: Eval would not build its document")
	}
	ctx := context.Background()
	tenants := []string{"acme", "globex", "initech", "umbrella"}
	var held [][]string
	for i, tenant := range tenants {
		in := Input{Action: "orders:" + tenant, User: User{TenantID: tenant, Roles: []string{"r-" + tenant}}}
		res, err := s.Eval(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, res.DenyReasons)
		for j, reasons := range held {
			want := []string{tenants[j], "orders:" + tenants[j], "r-" + tenants[j]}
			slices.Sort(want)
			if !slices.Equal(reasons, want) {
				t.Fatalf("after evaluation %d, the reasons of evaluation %d are %q, want %q", i, j, reasons, want)
			}
		}
	}
}

// TestInputClaimsError checks that claims that cannot be converted fail
// the input whether or not the policy reads them, as Value does.
func TestInputClaimsError(t *testing.T) {
	plan := cachePlan{paths: [][]*ast.Term{{keyAction}}}
	s := &Set{plan: plan, cache: newDecisionCache(plan, 16)}
	in := Input{User: User{Claims: map[string]any{"n": json.Number("x")}}}
	if _, err := s.input(&in, &docBuilder{}); err == nil {
		t.Fatal("claims holding an invalid number converted")
	}
	in = Input{Identity: &Identity{Claims: map[string]any{"n": json.Number("x")}}}
	if _, err := s.input(&in, &docBuilder{}); err == nil {
		t.Fatal("identity claims holding an invalid number converted")
	}
	if _, _, err := s.cache.key(&in, nil, new(keyEnc)); err == nil {
		t.Fatal("identity claims holding an invalid number made a cache key")
	}
	if _, err := in.Value(); err == nil {
		t.Fatal("identity claims holding an invalid number made a document")
	}
}
