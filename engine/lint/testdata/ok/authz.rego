package svc.authz

default allow := false

allow if input.user.role == "admin"

deny_reasons contains "not-admin" if not allow

# A workload that proved itself with a client certificate may read.
allow if {
	input.identity.kind == "mtls"
	input.identity.issuer == "acme.example"
	startswith(input.action, "orders:read")
}

# The owner of an order may read it, as the application says.
allow if {
	input.action == "orders:read"
	input.resource.attributes.owner == input.user.id
	input.resource.attributes.meta.region == "eu"
}
