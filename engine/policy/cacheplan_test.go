package policy_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit/policytest"
)

// mustModule builds a set from one module of package svc.authz.
func mustModule(t testing.TB, body string, opts ...policy.Option) *policy.Set {
	t.Helper()
	set, err := policy.FromModules(map[string]string{"authz.rego": "package svc.authz\n\n" + body}, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// mustNested loads testdata/cache/nested, a policy that reads input
// through nested and variable paths.
func mustNested(t testing.TB) *policy.Set {
	t.Helper()
	set, err := policy.Load(filepath.Join("testdata", "cache", "nested"))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestCacheKeys checks which parts of input a set's decisions are cached
// by, and that policies depending on more than input and data are not
// cached at all.
func TestCacheKeys(t *testing.T) {
	tests := []struct {
		name string
		set  func(testing.TB) *policy.Set
		keys []string
		// disabled is a substring of why the set does not cache; empty
		// when it caches.
		disabled string
		// online marks policies that would reach the network when
		// evaluated, which the test does not do.
		online bool
	}{
		{
			name: "default policy",
			set:  policytest.Default,
			keys: []string{"input.action", "input.resource.tenant", "input.tenant.id", "input.tenant.plan",
				"input.user.role", "input.user.roles", "input.user.tenant_id"},
		},
		{
			name: "variable header key keys on the whole header map",
			set:  mustNested,
			keys: []string{"input.request.headers", "input.request.method", "input.resource",
				"input.user.claims.field", "input.user.claims.level"},
		},
		{
			name: "computed key keys on the map",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, `allow if input.request.headers[lower("X-Tenant")] == "acme"`)
			},
			keys: []string{"input.request.headers"},
		},
		{
			name: "numeric index keys on the array",
			set:  func(t testing.TB) *policy.Set { return mustModule(t, `allow if input.user.roles[0] == "admin"`) },
			keys: []string{"input.user.roles"},
		},
		{
			name: "shorter path covers a longer one",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, "allow if input.user.role == \"admin\"\n\nallow if count(input.user) > 3")
			},
			keys: []string{"input.user"},
		},
		{
			name: "input passed to a function is the whole input",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, "allow if admin(input)\n\nadmin(x) if x.user.role == \"admin\"")
			},
			keys: []string{"input"},
		},
		{
			name: "input assigned is the whole input",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, "allow if {\n\tdoc := input\n\tdoc.user.role == \"admin\"\n}")
			},
			keys: []string{"input"},
		},
		{
			name: "no input read at all",
			set:  func(t testing.TB) *policy.Set { return mustModule(t, "allow := true") },
			keys: []string{},
		},
		{
			name:     "time.now_ns",
			set:      func(t testing.TB) *policy.Set { return mustModule(t, `allow if time.now_ns() > 0`) },
			disabled: "authz.rego:3: calls time.now_ns",
		},
		{
			name: "http.send in a helper",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, "allow if remote.body.ok\n\nremote := http.send({\"method\": \"GET\", \"url\": \"http://127.0.0.1:1/\"})",
					policy.AllowNetworkBuiltins(true))
			},
			disabled: "calls http.send",
			online:   true,
		},
		{
			name:     "rand.intn",
			set:      func(t testing.TB) *policy.Set { return mustModule(t, `allow if rand.intn("a", 10) == 3`) },
			disabled: "calls rand.intn",
		},
		{
			name: "uuid.rfc4122 nested in a call",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, `deny_reasons contains concat("-", ["id", uuid.rfc4122("x")])`)
			},
			disabled: "calls uuid.rfc4122",
		},
		{
			name: "io.jwt.decode_verify reads the clock",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, `allow if io.jwt.decode_verify(input.token, {"secret": "s"})[0]`)
			},
			disabled: "calls io.jwt.decode_verify",
		},
		{
			name: "certificate verification reads the clock",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, `allow if crypto.x509.parse_and_verify_certificates(input.chain)[0]`)
			},
			disabled: "calls crypto.x509.parse_and_verify_certificates",
		},
		{
			name: "with input",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, "allow if admin with input.user.role as \"admin\"\n\nadmin if input.user.role == \"admin\"")
			},
			disabled: "uses with",
		},
		{
			name: "with data",
			set: func(t testing.TB) *policy.Set {
				return mustModule(t, "allow if ok with data.flags.open as true\n\nok if data.flags.open")
			},
			disabled: "uses with",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := tt.set(t)
			keys, disabled := set.CacheKeys()
			_, _, _, enabled := set.CacheStats()
			if tt.disabled != "" {
				if !strings.Contains(disabled, tt.disabled) || keys != nil || enabled {
					t.Fatalf("CacheKeys = %q, %q (enabled %v); want disabled with %q", keys, disabled, enabled, tt.disabled)
				}
				// A set that does not cache still decides, every time.
				for i := 0; i < 2 && !tt.online; i++ {
					if _, err := set.Decide(context.Background(), benchInput()); err != nil {
						t.Fatal(err)
					}
				}
				if s := statsOf(set); s != (stats{}) {
					t.Fatalf("uncached set counted %+v", s)
				}
				return
			}
			if disabled != "" || !enabled {
				t.Fatalf("not cacheable: %s", disabled)
			}
			if diff := cmp.Diff(tt.keys, keys); diff != "" {
				t.Fatalf("keys differ (-want +got):\n%s", diff)
			}
		})
	}
}
