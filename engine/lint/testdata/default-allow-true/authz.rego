package svc.authz

default allow := true

allow if input.user.role == "admin"

deny_reasons contains "not-admin" if not allow
