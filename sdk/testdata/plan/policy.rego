# The policy of the SDKs' resource plan tests: owners read their orders
# unless archived, anyone in the tenant reads public ones (a status that
# starts with "public", case-sensitively, and does not mention a draft).
# Its plan has a "not" over an attribute that some rows lack: such a row
# is not archived; and the string tests starts_with and contains.
package svc.authz

default allow := false

allow if {
	input.resource.tenant == input.user.tenant_id
	input.resource.attributes.owner == input.user.id
	not input.resource.attributes.status == "archived"
}

allow if {
	input.resource.tenant == input.user.tenant_id
	startswith(input.resource.attributes.status, "public")
	not contains(input.resource.attributes.status, "draft")
}

deny_reasons := set() if allow
else := {"not-owner"}
