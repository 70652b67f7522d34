package svc.authz

allow if {
	input.user.name == "root"
}

deny_reasons contains 401 if not allow
