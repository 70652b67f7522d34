# The policy of the SDKs' resource plan tests: owners read their orders
# unless archived, anyone in the tenant reads public ones. Its plan has a
# "not" over an attribute that some rows lack: such a row is not archived.
package svc.authz

default allow := false

allow if {
	input.resource.tenant == input.user.tenant_id
	input.resource.attributes.owner == input.user.id
	not input.resource.attributes.status == "archived"
}

allow if {
	input.resource.tenant == input.user.tenant_id
	input.resource.attributes.status == "public"
}

deny_reasons := set() if allow
else := {"not-owner"}
