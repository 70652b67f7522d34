package svc.authz

default allow := false

allow if input.user.role == "admin"

deny_reasons := ["not-admin"] if not allow
