# METADATA
# title: Demo policy of docker-compose.yml
# description: |
#   For the local demo only, where the sidecar runs in development mode and
#   every caller is the anonymous subject without roles: reads of the
#   deployment's tenant are allowed, everything else is denied with a
#   reason. Real deployments use the default policy (policies/authz.rego)
#   or their own.
package svc.authz

default allow := false

allow if {
	input.user.tenant_id == input.tenant.id
	input.resource.tenant == input.tenant.id
	endswith(input.action, ":read")
}

deny_reasons := set() if {
	allow
} else := {"tenant-mismatch"} if {
	input.resource.tenant != input.tenant.id
} else := {"demo-read-only"}
