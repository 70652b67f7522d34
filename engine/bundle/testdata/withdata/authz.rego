package svc.authz

import data.svc.lib

default allow := false

# Tenants come from data.json at the top of the directory, which puts them
# outside data.svc: the bundle claims the extra root "tenants".
allow if {
	input.tenant.id in data.tenants.active
	lib.is_admin(input.user.role)
}

deny_reasons contains "not-admin" if not lib.is_admin(input.user.role)

deny_reasons contains "tenant-inactive" if not input.tenant.id in data.tenants.active
