package svc.authz

# Two bodies giving allow different values: a conflict at evaluation.
allow := true if input.a
allow := false if input.b
