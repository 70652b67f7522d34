package svc.authz

default allow := false

allow if {
	role := input.user.role
	role := "admin"
}

deny_reasons contains "not-admin" if not allow
