package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/svc-dev/svc/engine/lint"
	"github.com/svc-dev/svc/engine/policy"
)

// genRules writes a policy of n allow rules, half route gates (a method
// and a canonical path for a service's readers) and half role grants (an
// action for a service's editors), each in its tenant. Indexed, every
// condition OPA's rule index can use is an equality of an input field
// with a constant; unindexed, the same rules match the path with a
// regular expression and split the action instead, which the index cannot
// use (the role is checked by a function), so every rule is evaluated
// for every request.
func genRules(n int, indexed bool) string {
	var b strings.Builder
	b.WriteString("package svc.authz\n\ndefault allow := false\n\n")
	b.WriteString("deny_reasons := set() if {\n\tallow == true\n} else := {\"policy-denied\"}\n")
	if !indexed {
		b.WriteString("\nhas_role(role) if role in input.user.roles\n")
	}
	for i := range n {
		svc := fmt.Sprintf("svc%04d", i/2)
		if i%2 == 0 {
			if indexed {
				fmt.Fprintf(&b, "\n# Route gate: %[1]s's readers list its items.\nallow if {\n\tinput.request.method == \"GET\"\n\tinput.request.canonical_path == \"/api/%[1]s/items\"\n\tinput.user.tenant_id == input.resource.tenant\n\t\"%[1]s-reader\" in input.user.roles\n}\n", svc)
			} else {
				fmt.Fprintf(&b, "\n# Route gate: %[1]s's readers list its items.\nallow if {\n\tregex.match(`^/api/%[1]s/[^/]+$`, input.request.canonical_path)\n\tinput.user.tenant_id == input.resource.tenant\n\thas_role(\"%[1]s-reader\")\n}\n", svc)
			}
			continue
		}
		if indexed {
			fmt.Fprintf(&b, "\n# Role grant: %[1]s's editors update it.\nallow if {\n\tinput.action == \"%[1]s:update\"\n\tinput.user.tenant_id == input.resource.tenant\n\tsome role in input.user.roles\n\trole in {\"%[1]s-editor\", \"admin\"}\n}\n", svc)
		} else {
			fmt.Fprintf(&b, "\n# Role grant: %[1]s's editors update it.\nallow if {\n\t[service, verb] := split(input.action, \":\")\n\tservice == \"%[1]s\"\n\tverb == \"update\"\n\tinput.user.tenant_id == input.resource.tenant\n\tsome role in input.user.roles\n\trole in {\"%[1]s-editor\", \"admin\"}\n}\n", svc)
		}
	}
	return b.String()
}

// policySizeInput reads the last service's items: the last route gate
// allows it.
func policySizeInput(n int) []byte {
	svc := fmt.Sprintf("svc%04d", ((n-1)&^1)/2)
	return fmt.Appendf(nil, `{"action":"%[1]s:read","user":{"id":"u-1","role":"%[1]s-reader","roles":["%[1]s-reader"],"tenant_id":"acme","claims":{}},`+
		`"resource":{"type":"%[1]s","id":"i-1","tenant":"acme"},"tenant":{"id":"acme","plan":"team"},`+
		`"request":{"method":"GET","path":"/api/%[1]s/items","canonical_path":"/api/%[1]s/items","format":""}}`, svc)
}

// pointPolicySize compiles and evaluates a policy of n generated rules;
// "1000u" is the unindexed form of 1000.
func pointPolicySize(arg string, _ *options) (metrics, error) {
	indexed := !strings.HasSuffix(arg, "u")
	n, err := strconv.Atoi(strings.TrimSuffix(arg, "u"))
	if err != nil {
		return nil, err
	}
	src := genRules(n, indexed)
	start := time.Now()
	set, err := policy.FromModules(map[string]string{"authz.rego": src}, nil)
	if err != nil {
		return nil, err
	}
	m := metrics{"rules": float64(n), "compile_ms": float64(time.Since(start)) / float64(time.Millisecond)}
	if err := evalBench(set, policySizeInput(n), m); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "benchscale-rules-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(src), 0o644); err != nil {
		return nil, err
	}
	rep, err := lint.Dir(dir, lint.Options{})
	if err != nil {
		return nil, err
	}
	for _, f := range rep.Files {
		for _, x := range f.Findings {
			if x.Rule == lint.RuleNotIndexed {
				m["not_indexed"]++
			}
		}
	}
	return m, nil
}

func runPolicySize(o *options) (result, error) {
	res := result{
		What:      "policy size: 10, 100 and 1,000 generated allow rules (route gates on method and canonical path, role grants on the action); compile time, eval p50; the same 1,000 written so that OPA's rule index cannot use them, and what `core policy lint` says of each",
		Bound:     "eval p50 at 1,000 rules ≤ 2× at 10 (indexed); `rule-not-indexed` on every unindexed rule and on no indexed one",
		CurveUnit: "eval p50 µs",
	}
	var ms []metrics
	for _, arg := range []string{"10", "100", "1000", "1000u"} {
		m, err := measure("policy-size", arg, o)
		if err != nil {
			return res, err
		}
		ms = append(ms, m)
		label := arg + " rules"
		if strings.HasSuffix(arg, "u") {
			label = strings.TrimSuffix(arg, "u") + " rules, unindexed"
		}
		res.Figures += fmt.Sprintf("%s: compile %.0f ms, p50 %.1f µs, %d rule-not-indexed; ", label, m["compile_ms"], m["p50_us"], int(m["not_indexed"]))
		res.Curve = append(res.Curve, plotPoint{label, m["p50_us"]})
	}
	r := ms[2]["p50_us"] / ms[0]["p50_us"]
	res.Figures += fmt.Sprintf("ratio 1000/10 %.2f (unindexed: %.1f)", r, ms[3]["p50_us"]/ms[0]["p50_us"])
	lintOK := ms[0]["not_indexed"] == 0 && ms[1]["not_indexed"] == 0 && ms[2]["not_indexed"] == 0 && ms[3]["not_indexed"] == 1000
	res.Met = r <= 2 && lintOK
	switch {
	case !lintOK:
		res.Why = "not met: the lint's findings do not match the rules the index cannot use"
	case r > 2:
		res.Why = "not met: evaluation grows with the rules although the index should select them"
	}
	return res, nil
}
