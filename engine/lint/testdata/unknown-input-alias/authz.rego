package svc.authz

import input.request as req

default allow := false

allow if {
	input.user.role == "admin"
	req.headers["x-debug"] != "1"
	req.body == ""
	input.user.claims.department.name == "ops"
	input.user.roles[0] == "admin"
	input.resource[input.action] == "x"
}

deny_reasons contains "not-admin" if not allow
