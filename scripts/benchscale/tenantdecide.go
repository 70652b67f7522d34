package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
)

// decisionUsers is how many users present tokens at every point of the
// tenants row's decisions, spread over the point's tenants: the same
// tokens, verified-token cache and decision cache work at 10 tenants as
// at 10k, so that the tenants alone differ.
const decisionUsers = 10_000

// decisionRounds are the alternating rounds of the decisions; a point's
// figure is its median.
const decisionRounds = 5

// decisionMinter signs the ES256 tokens of the decisions' users, user i
// being of tenant i mod the point's tenant count.
type decisionMinter struct {
	minter
}

func (m *decisionMinter) mint(user, tenant int) string {
	payload := fmt.Sprintf(`{"iss":%q,"sub":"u%05d","aud":"svc","tenant_id":"tenant-%05d","roles":["viewer","editor"],"email":"u%05d@bench.example","iat":%d,"exp":%d}`,
		tokenIssuer, user, tenant, user, m.now.Unix(), m.now.Add(time.Hour).Unix())
	return m.sign(payload)
}

// jwksServer serves key's public half as a JWKS on a loopback http
// address, which the engine accepts, and returns its URL.
func jwksServer(key *ecdsa.PrivateKey) (string, func(), error) {
	b64 := base64.RawURLEncoding.EncodeToString
	x, y := make([]byte, 32), make([]byte, 32)
	key.X.FillBytes(x)
	key.Y.FillBytes(y)
	body, err := json.Marshal(map[string]any{"keys": []map[string]any{{
		"kty": "EC", "crv": "P-256", "kid": "bench", "use": "sig", "alg": "ES256", "x": b64(x), "y": b64(y),
	}}})
	if err != nil {
		return "", nil, err
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=3600")
		_, _ = w.Write(body)
	}))
	return srv.URL + "/jwks.json", srv.Close, nil
}

// rolePolicy is the default policy's role rules; tenantRule, when set,
// is added to its allow rule and tenantReason explains its denials.
func rolePolicy(tenantRule, tenantReason string) string {
	return `package svc.authz

role_permissions := {
	"viewer": {"*": {"read"}},
	"editor": {"*": {"read", "create", "update"}},
	"admin": {"*": {"*"}},
}

default allow := false

allow if {
` + tenantRule + `	[resource, verb] := split(input.action, ":")
	some role in input.user.roles
	some r in ["*", resource]
	some v in [verb, "*"]
	v in role_permissions[role][r]
}

deny_reasons := set() if {
	allow == true
} else := ` + tenantReason + `{"policy-denied"}
`
}

// tenantsPolicy is the role rules for a deployment serving every tenant:
// a caller acts only on its own tenant's resources (the proxy's mapping
// names the resource's tenant, from the path, say). The decision cache
// keys on the user's tenant, the resource's tenant, the roles and the
// action: a decision cached per tenant.
var tenantsPolicy = rolePolicy(`	tenant := input.user.tenant_id
	tenant != ""
	input.resource.tenant == tenant
`, `{"tenant-mismatch"} if {
	input.resource.tenant != input.user.tenant_id
} else := `)

// rolesPolicy is tenantsPolicy without the tenant rule: its decisions
// do not depend on the tenant, and the decision cache holds one for all
// tenants. It shows what the tenants' budgets alone cost a decision.
var rolesPolicy = rolePolicy("", "")

// decisionEngine is an engine as svc-sidecar builds it from a
// configuration serving every tenant with the policy in policyDir,
// tenant i with a budget of its own in rate_limit.per_tenant (large enough that no decision is refused,
// so that every one reaches the policy), the policy's decision cache and
// the verified-token cache at their default sizes.
func decisionEngine(jwksURL, policyDir string, tenants int) (*engine.Engine, error) {
	var cfg config.Config
	cfg.Policy.Dir = policyDir
	cfg.SDK.JWKSURL = jwksURL
	cfg.JWT.Issuer = tokenIssuer
	cfg.SDK.FailMode = config.FailClosed
	cfg.RateLimit.PerTenant = make(map[string]int, tenants)
	for i := range tenants {
		cfg.RateLimit.PerTenant[fmt.Sprintf("tenant-%05d", i)] = 1<<30 + i*600
	}
	return engine.New(cfg, engine.Deps{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// pointTenantDecisions times the engine's Authorize under tenantsPolicy
// (rolesPolicy when arg is "roles"), one caller, in CPU time and wall
// time, on cached tokens of decisionUsers users spread over each of
// tenantCounts tenants: every engine warmed up (each token verified, each
// tenant's bucket made, the decision cached), then decisionRounds rounds
// in which the points take turns, each round starting with the next
// point. The metrics are each point's median µs per decision, the
// decision cache's hit ratio over the timed rounds, and the CPU time of
// an evaluation, which each miss of the decision cache costs.
func pointTenantDecisions(arg string, o *options) (metrics, error) {
	module := tenantsPolicy
	switch arg {
	case "":
	case "roles":
		module = rolesPolicy
	default:
		return nil, fmt.Errorf("decisions: unknown policy %q (roles, or none for the tenants policy)", arg)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	url, stop, err := jwksServer(key)
	if err != nil {
		return nil, err
	}
	defer stop()
	dir, err := os.MkdirTemp("", "benchscale-tenants-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(module), 0o644); err != nil {
		return nil, err
	}
	mt := &decisionMinter{minter{key: key, now: time.Now(),
		header: base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"bench","typ":"JWT"}`))}}
	checks := 200_000
	if o.quick {
		checks = 40_000
	}
	ctx := context.Background()
	type point struct {
		e      *engine.Engine
		tokens []string
		inputs []engine.Input // user u's, on a resource of its tenant
	}
	pts := make([]point, len(tenantCounts))
	for p, n := range tenantCounts {
		e, err := decisionEngine(url, dir, n)
		if err != nil {
			return nil, err
		}
		defer e.Close()
		toks := make([]string, decisionUsers)
		ins := make([]engine.Input, decisionUsers)
		for u := range ins {
			ins[u] = engine.Input{Action: "orders:read", Resource: policy.Resource{Type: "orders", ID: "o-1", Tenant: fmt.Sprintf("tenant-%05d", u%n)}}
		}
		var wg sync.WaitGroup
		workers := runtime.GOMAXPROCS(0)
		for w := range workers {
			wg.Go(func() {
				for u := w; u < decisionUsers; u += workers {
					toks[u] = mt.mint(u, u%n)
				}
			})
		}
		wg.Wait()
		for u, tok := range toks {
			res, err := e.Authorize(ctx, tok, ins[u])
			if err != nil {
				return nil, fmt.Errorf("%d tenants, user %d: %w", n, u, err)
			}
			if !res.Allowed() {
				return nil, fmt.Errorf("%d tenants, user %d: refused: %s", n, u, res.Decision.Reason)
			}
		}
		pts[p] = point{e, toks, ins}
	}
	rng := mrand.New(mrand.NewPCG(5, 9))
	order := make([]int, checks)
	cost := make([][]float64, len(pts))
	cpu := make([][]float64, len(pts))
	warm := make([][2]uint64, len(pts))
	for p, pt := range pts {
		warm[p][0], warm[p][1], _, _ = pt.e.Policies().CacheStats()
	}
	for r := range decisionRounds {
		for i := range order {
			order[i] = rng.IntN(decisionUsers)
		}
		// Each round starts with another point, so that none is always
		// first after the collection or last.
		for q := range pts {
			p := (q + r) % len(pts)
			pt := pts[p]
			runtime.GC()
			start, cpu0 := time.Now(), processCPU()
			for _, u := range order {
				res, err := pt.e.Authorize(ctx, pt.tokens[u], pt.inputs[u])
				if err != nil {
					return nil, err
				}
				if !res.Allowed() {
					return nil, fmt.Errorf("%d tenants: refused: %s", tenantCounts[p], res.Decision.Reason)
				}
			}
			cost[p] = append(cost[p], us(time.Since(start))/float64(checks))
			cpu[p] = append(cpu[p], us(processCPU()-cpu0)/float64(checks))
		}
	}
	m := metrics{"checks": float64(checks)}
	// What a decision cache miss costs: the policy evaluated on a user's
	// input, as a miss does.
	in := policy.Input{Action: "orders:read", User: policy.User{ID: "u00001", TenantID: "tenant-00001", Role: "viewer", Roles: []string{"viewer", "editor"}},
		Resource: policy.Resource{Type: "orders", ID: "o-1", Tenant: "tenant-00001"}}
	set := pts[0].e.Policies()
	const evals = 2000
	cpu0 := processCPU()
	for range evals {
		if res, err := set.Eval(ctx, in); err != nil || !res.Allow {
			return nil, fmt.Errorf("evaluation: allow %v, %v", res.Allow, err)
		}
	}
	m["eval_cpu_us"] = us(processCPU()-cpu0) / evals
	for p, n := range tenantCounts {
		slices.Sort(cost[p])
		slices.Sort(cpu[p])
		m["decide_us_"+strconv.Itoa(n)] = cost[p][len(cost[p])/2]
		m["decide_cpu_us_"+strconv.Itoa(n)] = cpu[p][len(cpu[p])/2]
		hits, misses, entries, _ := pts[p].e.Policies().CacheStats()
		hits, misses = hits-warm[p][0], misses-warm[p][1]
		m["decision_cache_hit_ratio_"+strconv.Itoa(n)] = float64(hits) / float64(hits+misses)
		m["decision_cache_entries_"+strconv.Itoa(n)] = float64(entries)
	}
	return m, nil
}

// processCPU is the CPU time the process has used, user and system: the
// decisions' caller and the collector's work for it, not the time other
// processes of a loaded machine took the cores.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
