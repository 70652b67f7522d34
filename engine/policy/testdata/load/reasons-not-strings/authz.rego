package svc.authz

default allow := false

deny_reasons contains 42 if true

deny_reasons contains "tenant-mismatch" if true
