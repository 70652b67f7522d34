package policy

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// keyUsers are users of every kind the key of input.user tells apart:
// no custom claims (the shared empty map), custom claims of every JSON
// kind, claims that convert only through conversion (json.Number), claims
// that fail conversion, nil claims and roles, invalid UTF-8.
func keyUsers() map[string]User {
	full := fullInput().User
	return map[string]User{
		"no custom claims": {ID: "u-1", Role: "editor", Roles: []string{"editor"}, TenantID: "acme", Claims: map[string]any{}},
		"custom claims":    full,
		"other claims":     {ID: "u-1", Role: "editor", Roles: []string{"editor", "billing"}, TenantID: "acme", Email: "e@acme.example", Claims: map[string]any{"level": json.Number("1"), "groups": []any{"a"}}},
		"scalar claims":    {ID: "u-1", Role: "editor", Roles: []string{"editor", "billing"}, TenantID: "acme", Claims: map[string]any{"level": "x", "nested": 3, "groups": nil}},
		"convertible":      {ID: "u-2", Roles: []string{}, TenantID: "acme", Claims: map[string]any{"mfa": true, "n": 2.5, "tags": []string{"a"}, "m": map[string]string{"k": "v"}}},
		"bad number":       {ID: "u-3", Roles: []string{"viewer"}, Claims: map[string]any{"n": json.Number("x")}},
		"unconvertible":    {ID: "u-3", Roles: []string{"viewer"}, Claims: map[string]any{"ch": make(chan int)}},
		"nil claims":       {ID: "u-4", Role: "viewer"},
		"nil roles":        {ID: "u-4", Role: "viewer", Claims: map[string]any{}},
		"invalid UTF-8":    {ID: "u-\xff", Role: "\xc3", Roles: []string{"\xfe"}, TenantID: "acme", Email: "\xff", Claims: map[string]any{"level": "\xff"}},
		"other tenant":     {ID: "u-1", Role: "editor", Roles: []string{"editor"}, TenantID: "globex", Claims: map[string]any{}},
		"zero":             {},
	}
}

// keyInputs combines every user of keyUsers with requests that differ outside
// input.user.
func keyInputs() []Input {
	users := keyUsers()
	var ins []Input
	for _, name := range sortedKeys(users) {
		for _, in := range []Input{
			fullInput(),
			{Action: "orders:read", Resource: Resource{Tenant: "acme"}, Tenant: Tenant{ID: "acme", Plan: "team"}},
			{Action: "orders:read", Resource: Resource{Tenant: "globex"}, Tenant: Tenant{ID: "acme"}},
			{},
		} {
			in.User = users[name]
			ins = append(ins, in)
		}
	}
	return ins
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// keyPathSets are sets of key paths: those of the default policy, the
// whole input, the whole user, every path, and random ones.
func keyPathSets() [][][]*ast.Term {
	paths := []string{
		"action", "user", "user.id", "user.role", "user.roles", "user.roles.x", "user.tenant_id", "user.email",
		"user.claims", "user.claims.level", "user.claims.level.x", "user.claims.groups", "user.claims.nested.ok",
		"user.claims.missing", "user.other", "resource.tenant", "resource.id", "tenant.id", "tenant.plan",
		"request.method", "request.headers", "other",
	}
	sets := [][]string{
		{"action", "user.roles", "user.role", "user.tenant_id", "resource.tenant", "tenant.id", "tenant.plan"},
		{""}, {"user"}, {"action"}, {"user.claims"}, paths,
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 60 {
		set := make([]string, 1+rng.IntN(8))
		for i := range set {
			set[i] = paths[rng.IntN(len(paths))]
		}
		sets = append(sets, set)
	}
	var out [][][]*ast.Term
	for _, set := range sets {
		keyPaths := termPaths(set)
		out = append(out, minimalPaths(keyPaths))
	}
	return out
}

// refKey is the key as the document defines it: the part at each path of
// in.Value(), or the error of in.Value().
func refKey(c *decisionCache, in *Input) ([]keyPart, error) {
	doc, err := in.Value()
	if err != nil {
		return nil, err
	}
	parts := make([]keyPart, len(c.paths))
	for i, path := range c.paths {
		parts[i] = partAt(doc, path)
	}
	return parts, nil
}

// TestLazyKeyMatchesDocument: for every set of key paths and every
// input, the key lazyKey builds holds the parts of the whole document at
// those paths; it fails exactly when the document cannot be built; and
// two inputs share a key exactly when their parts of the document agree
// at every path, with equal encodings and hashes.
func TestLazyKeyMatchesDocument(t *testing.T) {
	ins := keyInputs()
	for _, paths := range keyPathSets() {
		c := newDecisionCache(cachePlan{paths: paths}, 16)
		keys := make([]cacheKey, len(ins))
		refs := make([][]keyPart, len(ins))
		for i := range ins {
			in := &ins[i]
			ref, refErr := refKey(c, in)
			k, _, err := c.lazyKey(in, nil, new(keyEnc))
			if (err != nil) != (refErr != nil) {
				t.Fatalf("paths %v, input %d: key error %v, document error %v", paths, i, err, refErr)
			}
			if err != nil {
				continue
			}
			k.materialize()
			if !sameParts(k.parts, ref) {
				t.Fatalf("paths %v, input %d: key parts %v, document parts %v", paths, i, k.parts, ref)
			}
			keys[i], refs[i] = k, ref
		}
		for i := range ins {
			for j := range ins {
				if refs[i] == nil || refs[j] == nil {
					continue
				}
				want := sameParts(refs[i], refs[j])
				if got := sameParts(keys[i].parts, keys[j].parts); got != want {
					t.Fatalf("paths %v, inputs %d and %d: same key %v, same document parts %v", paths, i, j, got, want)
				}
				if got := bytes.Equal(keys[i].key, keys[j].key); got != want {
					t.Fatalf("paths %v, inputs %d and %d: same key encoding %v, same document parts %v", paths, i, j, got, want)
				}
				if want && keys[i].hash != keys[j].hash {
					t.Fatalf("paths %v, inputs %d and %d: equal keys hash differently", paths, i, j)
				}
			}
		}
	}
}
