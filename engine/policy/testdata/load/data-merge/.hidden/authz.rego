package svc.authz

allow := "from a hidden directory"
