package svc.authz

default allow := false

# A number plus a string is a type error the compiler reports.
allow if {
	total := 1 + "one"
	total > 0
}
