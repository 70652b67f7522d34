package svc.authz

default allow := false

allow if input.user.role == "admin"

deny_reasons contains code if {
	not allow
	code := count(input.user.roles)
}
