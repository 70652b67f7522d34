package svc.authz

default allow := false

allow if {
	input.user.role == "admin"
	input.tenant.id == input.user.tenant_id
}

deny_reasons contains "not-admin" if {
	not allow
	input.user.role != "admin"
}

deny_reasons contains "tenant-mismatch" if {
	not allow
	input.tenant.id != input.user.tenant_id
}
