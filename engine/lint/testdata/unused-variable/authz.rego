package svc.authz

default allow := false

allow if {
	role := input.user.role
	input.user.role == "admin"
}

deny_reasons contains "not-admin" if not allow
