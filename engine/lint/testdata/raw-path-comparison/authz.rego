package svc.authz

import input.request as req

default allow := false

allow if {
	input.request.path == "/api/reports"
	startswith(input.request.path, "/api/")
	not regex.match(`^/api/sso`, req.path)
	input.request.canonical_path == "/api/reports"
	startswith(input.request.canonical_path, "/api/")
	lower(input.request.path) != "/x"
	x := endswith(input.request.path, ".json")
	x
	input.request.path in {"/a", "/b"}
}

deny_reasons contains "closed" if not allow

path := input.request.path

deny_reasons contains "export" if {
	p := input.request.path
	q = lower(p)
	q == "/api/reports/export"
	endswith(path, "/export")
	trim_suffix(req.path, ".json") in {"/a"}
}
