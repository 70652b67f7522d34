package svc.authz

default allow := false

# permissions maps a role to the actions it may take.
permissions := {
	"viewer": {"orders:read"},
	"editor": {"orders:read", "orders:update"},
}

allow if {
	input.user.tenant_id == input.resource.tenant
	input.action in permissions[input.user.role]
}

deny_reasons contains "tenant-mismatch" if input.user.tenant_id != input.resource.tenant

deny_reasons contains reason if {
	not input.action in permissions[input.user.role]
	reason := sprintf("role-forbidden: %s cannot %s", [input.user.role, input.action])
}

deny_reasons contains "role-missing" if input.user.role == ""
