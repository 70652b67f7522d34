package svc.authz

default allow := false

allow if count(input.user.role, 2) > 0

deny_reasons contains "not-admin" if not allow
