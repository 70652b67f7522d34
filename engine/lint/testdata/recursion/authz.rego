package svc.authz

default allow := false

allow if admin

admin if allow

deny_reasons contains "not-admin" if not allow
