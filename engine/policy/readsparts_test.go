package policy_test

import (
	"testing"

	"github.com/svc-dev/svc/engine/policy"
)

// TestReadsRequestParts: a set reads input.request.headers or
// input.request.query when some reference reaches them, through them or
// above them, and both when it does not cache decisions.
func TestReadsRequestParts(t *testing.T) {
	tests := []struct {
		name           string
		rule           string
		headers, query bool
	}{
		{"neither", `allow if input.action == "x"`, false, false},
		{"other request fields", `allow if { input.request.method == "GET"; input.request.path == "/"; input.request.source_ip != "" }`, false, false},
		{"one header", `allow if input.request.headers["x-team"] == "blue"`, true, false},
		{"all headers", `allow if count(input.request.headers) > 1`, true, false},
		{"one query key", `allow if input.request.query.mode == "ro"`, false, true},
		{"the request", `allow if { r := input.request; r.method == "GET" }`, true, true},
		{"the input", `allow if { x := input; x.action == "x" }`, true, true},
		{"not cachable", `allow if { time.now_ns() > 0; input.action == "x" }`, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, err := policy.FromModules(map[string]string{"p.rego": "package svc.authz\n\n" + tc.rule + "\n"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			h, q := set.ReadsRequestParts()
			if h != tc.headers || q != tc.query {
				t.Errorf("ReadsRequestParts() = %v, %v; want %v, %v", h, q, tc.headers, tc.query)
			}
		})
	}
}
