package svc.authz

default allow := false

deny_reasons := {"reason": "tenant-mismatch"}
