package svc.authz

default allow := false

allow if input.user.role == "admin"

deny_reasons := set() if {
	allow == true
} else := {"policy-denied"}

# Three rules none of which the index can use: too few for the index to
# matter, so none is reported.
explained contains "a" if lower(input.action) == "a"

explained contains "b" if count(input.user.roles) == 0

explained contains "c" if not input.user.role
