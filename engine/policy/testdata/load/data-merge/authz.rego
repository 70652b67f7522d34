package svc.authz

default allow := false

# Roles come from roles/data.yaml, the tenant list from data.json at the
# root, and the admin flag from roles/admin/data.yml.
allow if {
	data.roles.grants[input.user.role][_] == input.action
	input.tenant.id in data.tenants
	data.roles.admin.enabled
}

deny_reasons contains "not-allowed" if not allow
