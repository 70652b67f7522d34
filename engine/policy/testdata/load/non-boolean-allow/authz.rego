package svc.authz

allow := "yes"

deny_reasons := set()
