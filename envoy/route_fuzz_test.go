package envoy

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// FuzzRouteMatch holds the route matcher to its contract: folding only
// adds matches; a match does not depend on the letter case of the request
// (ASCII), while captures keep it; captures come from the request; and a
// case-sensitive table refuses exactly the near misses, with path-invalid.
func FuzzRouteMatch(f *testing.F) {
	for _, r := range append(append([]config.Route{}, testRoutes...), exportRoutes...) {
		f.Add(r.Path, "POST", "/api/reports/R7/Export.json")
		f.Add(r.Path, "GET", "/files/AbC.JSON")
	}
	f.Add("/a/{id}.{resource}/b", "GET", "/A/x.Y/B.txt")
	f.Add("/{tenant}/*", "DELETE", "/T/%41/../b")
	f.Fuzz(func(t *testing.T, tmpl, method, target string) {
		rt, err := compileRoute(0, config.Route{Path: tmpl, Action: "route:Matched"})
		if err != nil {
			return
		}
		segs, _, err := cleanPath(target)
		if err != nil {
			return
		}
		method = strings.ToUpper(method)
		m0, _ := NewMapper(testTenant, nil)
		strict, okStrict := rt.match(method, m0.view(segs), false)
		folded, okFold := rt.match(method, m0.view(segs), true)
		if okStrict && (!okFold || strict != folded) {
			t.Fatalf("%q on %q: strict match %+v, folded %v %+v", tmpl, target, strict, okFold, folded)
		}
		swapped := make([]string, len(segs))
		for i, s := range segs {
			swapped[i] = testkit.SwapASCIICase(s)
		}
		other, okOther := rt.match(method, m0.view(swapped), true)
		if okOther != okFold {
			t.Fatalf("%q: %q matches %v, with its letter case swapped %v", tmpl, target, okFold, okOther)
		}
		if okFold {
			want := captures{testkit.SwapASCIICase(folded.resource), testkit.SwapASCIICase(folded.id), testkit.SwapASCIICase(folded.tenant)}
			if other != want {
				t.Fatalf("%q on %q: captures %+v, with the case swapped %+v", tmpl, target, folded, other)
			}
			joined := strings.Join(segs, "/")
			for _, v := range []string{folded.resource, folded.id, folded.tenant} {
				if !strings.Contains(joined, v) {
					t.Fatalf("%q on %q: capture %q is not from the request", tmpl, target, v)
				}
			}
		}

		m, err := NewMapper(testTenant, []config.Route{{Path: tmpl, Action: "route:Matched"}})
		if err != nil {
			t.Fatalf("compileRoute accepted %q, NewMapper did not: %v", tmpl, err)
		}
		_, in, err := m.mapRequest(proxyRequest{method: method, target: target})
		if err != nil {
			if reason.Of(err, "") != reason.InputInvalid {
				t.Fatalf("folding table: %v", err)
			}
		} else if (in.Action == "route:Matched") != okFold {
			t.Fatalf("folding table: action %q, route matched %v", in.Action, okFold)
		}
		m.WithCaseSensitiveRoutes(true)
		_, in, err = m.mapRequest(proxyRequest{method: method, target: target})
		switch c := reason.Of(err, ""); {
		case err == nil && in.Action == "route:Matched" && !okStrict:
			t.Fatalf("case-sensitive table: route taken without a strict match")
		case err == nil && in.Action != "route:Matched" && okFold:
			t.Fatalf("case-sensitive table: a near miss fell to the default mapping (%q)", in.Action)
		case c == reason.PathInvalid && (okStrict || !okFold):
			t.Fatalf("case-sensitive table: refused without a near miss: %v", err)
		case err != nil && c != reason.PathInvalid && c != reason.InputInvalid:
			t.Fatalf("case-sensitive table: %v", err)
		}
	})
}
