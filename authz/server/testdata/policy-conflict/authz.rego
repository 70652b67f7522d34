package svc.authz

# A policy that cannot decide for resource "conflict": allow gets two values.
default allow := false

allow if input.resource.id == "allowed"

allow := false if input.resource.id == "conflict"

allow if input.resource.id == "conflict"

deny_reasons := set() if allow
else := {"not-allowed"}
