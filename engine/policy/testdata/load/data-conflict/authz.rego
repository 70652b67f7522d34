package svc.authz

default allow := false
