package svc.authz

# Neither allow nor deny_reasons is ever defined.
unused := input.nothing
