package svc.other

allow := true
