package svc.authz

default allow := false

allow if input.user.role == "admin"

deny_reasons contains 403 if not allow
