package svc.authz

# The owner of a resource may act on it, unless it is archived.
default allow := false

allow if {
	input.resource.attributes.owner == input.user.id
	input.resource.attributes.status != "archived"
}

deny_reasons := set() if allow
else := {"not-owner"}
