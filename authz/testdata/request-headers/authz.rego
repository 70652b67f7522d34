package svc.authz

# Callers from the internal network, by their address, and an operator
# named by a header: what a policy may read of input.request.headers
# behind the sidecar's proxy check, which strips the sidecar's own
# x-svc-* headers and, unless sidecar.trust_forwarded_for, the forwarding
# headers a client can send.
default allow := false

allow if startswith(input.request.headers["x-forwarded-for"], "10.")

allow if startswith(input.request.headers["x-real-ip"], "10.")

allow if contains(input.request.headers.forwarded, "for=10.")

allow if input.request.headers["x-svc-roles"] == "admin"

allow if input.request.headers["x-svc-user-id"] == "root"

allow if input.request.headers["x-team"] == "ops"

deny_reasons := set() if allow
else := {"not-internal"}
