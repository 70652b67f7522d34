package svc.authz

# A complete rule is fine when its value is a set of strings.
default allow := false

allow if input.user.role == "admin"

deny_reasons := set() if allow else := {"not-admin"}
