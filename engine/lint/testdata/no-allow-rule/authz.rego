package svc.authz

default allow := false

deny_reasons contains "never-allowed" if true
