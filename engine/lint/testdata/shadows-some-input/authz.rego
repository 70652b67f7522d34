package svc.authz

default allow := false

allow if {
	some input in ["admin"]
	input == "admin"
}

deny_reasons contains "not-admin" if not allow
